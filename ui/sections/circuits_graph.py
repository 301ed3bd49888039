"""Circuits page: the circuit graph. Heads are nodes placed by layer, coloured by direct logit
attribution; edges come from the AtP* estimate of every edge (the first picture of the whole
graph), from the path patching run so far, or from the weights' composition scores; a
threshold keeps the strong ones; a clicked node (or the picker beside it) opens the head in the
explorer (layout only; the graph is models.circuits.graph)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from models.circuits import CircuitGraph, Edge, graph_from_estimates, graph_from_paths
from models.circuits.cost import edges_cost
from models.errors import UserError
from models.head import Head, all_heads
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Circuits
from ui.sections import circuits_atp, circuits_weights
from ui.sections.circuits_session import Ready, apply, bound, finished, path_key, weights_key
from ui.state import circuits as cs
from ui.state import circuits_derived as derived
from ui.state.circuits import CircuitsState, GraphSource
from viz.circuit_graph import MAX_EDGES, circuit_graph_figure

SOURCE_LABELS: dict[GraphSource, str] = {
    "estimates": "AtP* estimates of every edge",
    "paths": "path patching run so far",
    "weights": "the weights (composition scores)",
}
NODE_EDGES = 5  # edges listed each way for the picked head
MODE_LABELS = {
    "recomputed": "MLPs recomputed (as path patching)",
    "direct": "direct (MLPs frozen, no extra pass)",
}


def edges_form(model: ModelHandle, ready: Ready, state: CircuitsState) -> None:
    """Whether attribution patching also estimates every edge, how, and what that costs."""
    n = ready.setup.n_tokens
    costs = {mode: edges_cost(model, n, state.atp.qk_fix, mode) for mode in cs.MLP_MODES}
    on = cs.atp_options(state, costs[state.edges_mode].seconds).edges is not None
    c = st.columns([2, 3])
    c[0].toggle(
        "Estimate every edge with AtP*",
        help="Every sender into every later head's "
        "q, k and v: the sender's clean output moved into the receiver's input "
        "exactly, only the step from there to LD linearised.",
        **bound(Circuits.EDGES, on, cs.set_edges),
    )
    c[1].radio(
        "Edge estimates",
        cs.MLP_MODES,
        horizontal=True,
        format_func=lambda m: f"{MODE_LABELS[m]}: {costs[m].describe()}",
        **bound(Circuits.EDGES_MODE, state.edges_mode, cs.choose_edges_mode),
    )


def path_graph(
    ready: Ready, state: CircuitsState, n_layers: int, n_heads: int, dla: np.ndarray
) -> CircuitGraph | None:
    """The graph of every finished path patching run of this task (None: none yet)."""
    requests = [*state.paths, cs.shown_path(state, dla)]
    results = [
        r
        for r in (finished(path_key(ready, q)) for q in dict.fromkeys(requests))
        if r is not None and r.input in state.graph_inputs
    ]
    return graph_from_paths(results, n_layers, n_heads, dla) if results else None


def graphs(
    model: ModelHandle, ready: Ready | None, state: CircuitsState
) -> dict[GraphSource, CircuitGraph | str]:
    """Each source's graph, or why it has none (the weights only when kept or chosen)."""
    facts = model.facts
    out: dict[GraphSource, CircuitGraph | str] = {}
    if ready is None:
        why = "it needs a task (above) on a causal language model"
        out["estimates"] = out["paths"] = why
    else:
        dla = ready.base.attribution.heads
        edges_form(model, ready, state)
        found = circuits_atp.run(model, ready, state)
        out["estimates"] = (
            graph_from_estimates(found.edges, dla, inputs=state.graph_inputs)
            if found is not None and found.edges is not None
            else "switch the edge estimates on (above) and let them finish"
        )
        paths = path_graph(ready, state, facts.n_layers, facts.n_heads, dla)
        out["paths"] = paths if paths is not None else "run path patching (above) first"
    weights = finished(weights_key(model))
    if weights is None and state.graph_source == "weights":
        weights = circuits_weights.weights(model, state)
    out["weights"] = (
        derived.composition_graph(weights.composition, facts.n_layers, state.graph_inputs)
        if weights is not None
        else "the weights are not read yet"
    )
    return out


def _picked(n_layers: int, n_heads: int) -> None:
    """The graph's selection callback: a clicked node becomes the picked head."""
    event = st.session_state.get(Circuits.GRAPH)
    points = (event or {}).get("selection", {}).get("points", [])
    for point in points:
        if point.get("customdata") is not None:
            apply(cs.pick_node, point["customdata"], n_layers, n_heads)
            return


def edge_table(edges: tuple[Edge, ...], prompt: str | None) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "sender": str(e.sender),
                "receiver": str(e.receiver),
                "input": e.input,
                "weight": e.weight,
                "shared by": ", ".join(str(Head(e.receiver.layer, h)) for h in e.shared_by),
                "open sender": session.explorer_link(e.sender, prompt=prompt),
                "open receiver": session.explorer_link(e.receiver, prompt=prompt),
            }
            for e in edges
        ]
    )


def node_picker(
    shown: tuple[Edge, ...], state: CircuitsState, prompt: str | None, nodes: list[Head]
) -> None:
    """Every head drawn can be picked (by a click on its node or here; at first the strongest
    edge's receiver); the edges shown into and out of it are counted."""
    head = (
        state.graph_head
        if state.graph_head in nodes
        else (shown[0].receiver if shown else nodes[0])
    )
    c = st.columns([1, 3])
    head = c[0].selectbox(
        "Head in the graph (or click a node)",
        nodes,
        format_func=str,
        **bound(Circuits.GRAPH_NODE, head, cs.choose_graph_head),
    )
    ins = [e for e in shown if e.receiver == head]
    outs = [e for e in shown if e.sender == head]
    c[1].markdown(
        f"**[Open {head} in the explorer ↗]({session.explorer_link(head, prompt=prompt)})**"
        f" · {len(ins)} edge{'s' if len(ins) != 1 else ''} in, {len(outs)} out"
    )
    c[1].markdown(node_detail(head, ins, outs))


def node_detail(head: Head, ins: list[Edge], outs: list[Edge]) -> str:
    """The picked head's strongest edges in and out (what a click on its node opens)."""

    def listed(edges: list[Edge], other: str) -> str:
        if not edges:
            return "none shown"
        parts = [f"{getattr(e, other)} ({e.input}) {e.weight:+.3g}" for e in edges[:NODE_EDGES]]
        more = len(edges) - NODE_EDGES
        return ", ".join(parts) + (f" and {more} more" if more > 0 else "")

    return (
        f"Head {head}: into it from {listed(ins, 'sender')}; "
        f"out of it into {listed(outs, 'receiver')}."
    )


def draw(
    model: ModelHandle,
    graph: CircuitGraph,
    state: CircuitsState,
    ready: Ready | None,
    source: GraphSource,
) -> None:
    """The threshold, the figure, the node picker, where edges end, the edge table."""
    facts = model.facts
    weights = [e.weight for e in graph.edges]
    top = max((abs(w) for w in weights), default=0.0)
    threshold = cs.shown_threshold(state, weights)
    if top > 0:
        step = float(f"{top / 200:.2g}") or top / 200
        threshold = st.slider(
            "Show edges with |weight| at least",
            0.0,
            float(top),
            step=step,
            format="%.4f",
            **bound(
                Circuits.THRESHOLD,
                float(min(threshold, top)),
                cs.set_threshold,
            ),
        )
    shown = graph.above(threshold).edges[:MAX_EDGES]
    fig = circuit_graph_figure(
        graph,
        threshold,
        title=f"Circuit graph ({SOURCE_LABELS[source]})",
        node_name="DLA" if graph.node_values is not None else "value",
    )
    st.plotly_chart(
        fig,
        key=Circuits.GRAPH,
        on_select=lambda: _picked(facts.n_layers, facts.n_heads),
        selection_mode="points",
        width="stretch",
    )
    st.caption(
        "Edges: red positive, blue negative, wider stronger; q solid, k dashed, v "
        "dotted"
        + ("; nodes coloured by direct logit attribution" if graph.node_values is not None else "")
        + ". A shared key/value head's edge is drawn into every query head that reads "
        "it."
    )
    prompt = ready.task.clean if ready is not None else None
    node_picker(shown, state, prompt, list(all_heads(facts.n_layers, facts.n_heads)))
    if ready is not None and source != "weights":
        st.info(derived.endings(shown, ready.base.attribution.heads))
    with st.expander(f"The {len(shown)} edges shown"):
        st.dataframe(
            edge_table(shown, prompt),
            hide_index=True,
            width="stretch",
            column_config={
                "weight": st.column_config.NumberColumn(format="%+.4f"),
                "open sender": st.column_config.LinkColumn(display_text="open ↗"),
                "open receiver": st.column_config.LinkColumn(display_text="open ↗"),
            },
        )


def section(model: ModelHandle, ready: Ready | None, state: CircuitsState) -> None:
    """The circuit graph from the chosen source."""
    st.subheader("The circuit graph")
    try:
        found = graphs(model, ready, state)
    except UserError as err:
        session.show_error(err)
        return
    c = st.columns([3, 2])
    available = [s for s in cs.GRAPH_SOURCES if isinstance(found[s], CircuitGraph)]
    source = cs.shown_source(state, available) or state.graph_source
    source = source or ("estimates" if ready is not None else "weights")
    c[0].radio(
        "Edges from",
        cs.GRAPH_SOURCES,
        horizontal=True,
        format_func=SOURCE_LABELS.__getitem__,
        **bound(Circuits.GRAPH_SOURCE, source, cs.choose_source),
    )
    c[1].multiselect(
        "Receiver inputs",
        cs.INPUTS,
        **bound(
            Circuits.GRAPH_INPUTS,
            list(state.graph_inputs),
            cs.choose_graph_inputs,
        ),
    )
    graph = found[source]
    if not isinstance(graph, CircuitGraph):
        st.info(f"No graph from {SOURCE_LABELS[source]} yet: {graph}.")
        return
    if not graph.edges:
        st.info("No edge: every weight is 0 for the inputs chosen.")
        return
    draw(model, graph, state, ready, source)
