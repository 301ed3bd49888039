"""Circuits page: path patching (head to head) into one receiver's q, k or v as a job, every
sender's effect as a layer × head grid with links into the explorer (layout only; the maths is
models.circuits.paths)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from models.circuits import PathResult, path_patching
from models.circuits.cost import path_cost
from models.errors import UserError
from models.head import Head
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Circuits
from ui.sections import circuits_loadings as loadings
from ui.sections.circuits_session import Ready, apply, bound, path_key
from ui.state import circuits as cs
from ui.state.circuits import CircuitsState, PathRequest
from ui.widgets import job_view
from viz.circuits_figures import head_grid

INPUT_LABELS = {"q": "q (its queries)", "k": "k (its keys)", "v": "v (its values)"}
MLP_LABELS = {
    "recomputed": "recomputed on the way (IOI paper)",
    "direct": "frozen (direct paths only)",
}
TOP_SENDERS = 12
QUIET_PATH = 0.01  # below this |path effect| (a fraction of the gap) no sender reaches the input


def receiver_form(model: ModelHandle, ready: Ready, state: CircuitsState) -> PathRequest:
    """Receiver head, its input and how MLPs are treated, shown from the state."""
    facts = model.facts
    request = cs.shown_path(state, ready.base.attribution.heads)
    heads = [Head(layer, h) for layer in range(1, facts.n_layers) for h in range(facts.n_heads)]
    c = st.columns([1, 2, 2])

    dla = ready.base.attribution.heads

    def change(field: str) -> Callable[[CircuitsState, Any], CircuitsState]:
        return lambda s, value: cs.choose_path(
            s, replace(cs.shown_path(s, dla), **{field: value}), facts.n_layers, facts.n_heads
        )

    c[0].selectbox(
        "Receiver head",
        heads,
        format_func=str,
        help="By default the head direct logit attribution ranks highest.",
        **bound(Circuits.RECEIVER, request.receiver, change("receiver")),
    )
    c[1].radio(
        "through its",
        cs.INPUTS,
        horizontal=True,
        format_func=INPUT_LABELS.__getitem__,
        **bound(Circuits.INPUT, request.input, change("input")),
    )
    c[2].radio(
        "MLPs between sender and receiver",
        cs.MLP_MODES,
        horizontal=True,
        format_func=MLP_LABELS.__getitem__,
        **bound(Circuits.MLPS, request.mlps, change("mlps")),
    )
    return request


def describe(model: ModelHandle, request: PathRequest) -> str:
    facts, receiver = model.facts, request.receiver
    how = (
        "MLPs recompute between sender and receiver, as in the IOI paper, so a path may "
        "run through them"
        if request.mlps == "recomputed"
        else "MLPs are frozen too (TransformerLens' direct path patching): only the direct "
        "path through the residual stream counts"
    )
    text = (
        f"Each head of layers 0–{receiver.layer - 1} (the sender) gets its clean output; "
        f"it reaches {receiver}'s {request.input} alone, every other path keeps its "
        f"corrupted value. {how}."
    )
    if request.input != "q" and facts.n_kv_heads < facts.n_heads:
        kv = facts.groups.kv_head(receiver.index)
        shared = ", ".join(
            str(Head(receiver.layer, h)) for h in tuple(facts.groups.query_heads(kv))
        )
        text += (
            f" The {request.input} of {receiver} is key/value head {kv}, shared by "
            f"{shared}: the path patches it for all of them."
        )
    return text


def senders_table(ready: Ready, result: PathResult) -> pd.DataFrame:
    """The senders with the largest |path effect|, strongest first, with explorer links."""
    effects = result.effects
    order = np.argsort(-np.abs(effects), axis=None, kind="stable")[:TOP_SENDERS]
    rows = []
    for flat in order:
        head = Head(int(flat) // effects.shape[1], int(flat) % effects.shape[1])
        rows.append(
            {
                "sender": str(head),
                "path effect": float(effects[head]),
                "open": session.explorer_link(head, prompt=ready.task.clean),
            }
        )
    return pd.DataFrame(rows)


def show(ready: Ready, result: PathResult) -> None:
    title = f"Path effect of each sender on {result.receiver} through its {result.input}"
    left, right = st.columns([3, 2])
    left.plotly_chart(
        head_grid(result.effects, title=title, value_name="path effect", floor=0.1), width="stretch"
    )
    right.markdown(f"**Strongest senders into {result.receiver} ({result.input})**")
    right.dataframe(
        senders_table(ready, result),
        hide_index=True,
        width="stretch",
        column_config={
            "path effect": st.column_config.NumberColumn(format="%+.4f"),
            "open": st.column_config.LinkColumn("explorer", display_text="open ↗"),
        },
    )
    largest = float(np.nanmax(np.abs(result.effects))) if result.effects.size else 0.0
    if largest < QUIET_PATH:
        others = " or ".join(f"its {i}" for i in ("q", "k", "v") if i != result.input)
        st.info(
            f"No sender reaches {result.receiver} through its {result.input} on this task: the "
            f"largest |path effect| is {largest:.4f} of the gap. A head can matter through "
            f"one input and not another (an induction head finds its target through its keys, "
            f"which a previous-token head writes): try {others}."
        )
    right.caption(
        f"[Open the receiver {result.receiver} in the explorer ↗]"
        f"({session.explorer_link(result.receiver, prompt=ready.task.clean)}). "
        "Heads in its layer or later cannot reach it: 0."
    )


def section(model: ModelHandle, ready: Ready, state: CircuitsState) -> PathResult | None:
    """Path patching into the chosen receiver input: form, cost, job, grid and senders."""
    st.subheader("Path patching: which heads feed one head")
    request = receiver_form(model, ready, state)
    st.caption(describe(model, request))
    cost = path_cost(model, ready.setup.n_tokens, request.receiver.layer)
    st.caption(f"Cost: {cost.describe()}.")
    if not cs.path_wanted(state, request, cost.seconds):
        st.button(
            f"Path patch into {request.receiver} {request.input} (about {cost.seconds:.2g} s)",
            key=Circuits.RUN_PATH,
            type="primary",
            on_click=apply,
            args=(cs.ask_path, request),
        )
        return None
    try:
        found = job_view.run_job(
            path_key(ready, request),
            f"Path patching into {request.receiver} {request.input}",
            lambda p: path_patching(
                model, ready.setup, request.receiver, request.input, mlps=request.mlps, progress=p
            ),
            cost=cost.cost,
            scale=job_view.Scale(
                lambda n: path_cost(model, n, request.receiver.layer).cost,
                ready.setup.n_tokens,
                "tokens in each prompt for this receiver",
            ),
        )
    except UserError as err:
        session.show_error(err)
        return None
    if found is job_view.MISSING:
        return None
    show(ready, found)
    loadings.path_section(model, ready, path_key(ready, request), found)
    return found
