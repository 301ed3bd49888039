"""The explorer's interactive view: the head grid, the chosen head in detail, the tokens.

Everything runs inside one fragment, so a click on a head, a token, the overview or an option
reruns only this view, not the page. The view is one :class:`ui.state.explorer.ExplorerView` in
the session; every click replaces it through a pure transition, and the widgets only show it,
so the view survives a visit to another page.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import streamlit as st

from models.capture.run import AttentionRun
from models.capture.sinks import measured_sink
from models.capture.views import scoped_weights
from models.errors import UserError
from models.head import Head
from models.model.facts import ModelFacts
from ui import session
from ui.keys import Explorer
from ui.runtime import server
from ui.runtime.job_keys import RunKey, SinkSummaryKey, WeightingKey
from ui.runtime.jobs import Cost
from ui.sections import explorer_detail as detail
from ui.sections import explorer_results as results
from ui.sections.explorer_session import current_view, save, seed, strongest, update
from ui.state import explorer as state
from ui.state.explorer import ExplorerView, RunShape
from ui.text import md
from ui.widgets import components, job_view
from viz.token_view import legend_html, token_spans
from viz.view_state import ViewState

SCOPES: dict[state.Scope, str] = {"head": "This head", "layer": "Mean over the layer's heads",
                                  "all": "Mean over all heads"}
DIRECTIONS: dict[state.Direction, str] = {"from": "What the token attends to",
                                          "to": "Which tokens attend to it"}


def intro(run: AttentionRun) -> None:
    """One line on the model and prompt, and hints where they help."""
    facts = run.facts
    st.caption(
        f"**{md(facts.name)}** · {facts.n_layers} layers × {facts.n_heads} heads "
        f"({facts.attention_kind}, {facts.n_kv_heads} key/value heads) · d_head {facts.d_head} · "
        f"{'causal' if facts.causal else 'bidirectional (no causal mask)'} · "
        f"positions: {facts.positional} · {run.n_tokens:,} tokens")
    if run.spec is not None and run.spec.kind == "bundled":
        st.caption("The bundled model is a small toy trained on Python. For a real language "
                   "model's induction heads and attention sinks, choose **SmolLM2-135M (offline)** "
                   "in the sidebar and the example *A passage, twice (about 2,000 tokens)*.")


def sink_hint(run: AttentionRun, key: RunKey) -> None:
    """What this run's heads actually sink into, measured on a few rows of every head."""
    found = server.current().derived.get_or_compute(SinkSummaryKey(key),
                                                    lambda: measured_sink(run))
    if found.mean_weight < 0.2:
        return
    label = md(run.tokens[found.position])
    special = " (a special token the tokenizer adds)" if (
        found.position == 0 and run.first_is_special) else ""
    st.caption(f"Attention sink: position {found.position}, {label}{special}, takes "
               f"{found.mean_weight:.0%} of the attention on average over every head "
               f"(measured on {len(found.rows)} query rows); it is the favourite key of "
               f"{found.n_heads} of {found.n_total} heads.")


def full_run() -> None:
    """A full page run redraws the grid from scratch: the pictures must be sent again."""
    st.session_state.pop(Explorer.GRID_SHOWN, None)


def on_head_click(run_key: RunKey) -> None:
    clicked = components.clicked_value(Explorer.GRID)
    if clicked:
        head = Head.parse(clicked)
        update(run_key, lambda v, s, r: state.choose_head(v, head, s, strongest(r)))


def on_token_click(run_key: RunKey) -> None:
    clicked = components.clicked_value(Explorer.TOKENS)
    if clicked is not None:
        update(run_key, lambda v, s, r: state.choose_token(v, int(clicked), s, strongest(r)))


def on_selectors(run_key: RunKey) -> None:
    ss = st.session_state
    head = Head(int(ss[Explorer.LAYER]), int(ss[Explorer.HEAD]))
    token = int(ss[Explorer.TOKEN])

    def change(view: ExplorerView, shape: RunShape, run: AttentionRun) -> ExplorerView:
        if head != view.head:
            view = state.choose_head(view, head, shape, strongest(run))
        if token != view.token:
            view = state.choose_token(view, token, shape, strongest(run))
        return view
    update(run_key, change)


def on_options() -> None:
    ss, view = st.session_state, current_view()
    save(replace(view, scope=ss.get(Explorer.SCOPE, view.scope),
                 direction=ss.get(Explorer.DIRECTION, view.direction),
                 weighted=bool(ss.get(Explorer.WEIGHTED, view.weighted))))


def selectors(view: ExplorerView, facts: ModelFacts, run: AttentionRun, key: RunKey,
              labels: list[str]) -> None:
    ss = st.session_state
    ss[Explorer.LAYER], ss[Explorer.HEAD] = view.head.layer, view.head.index
    ss[Explorer.TOKEN] = view.query
    c = st.columns([1, 1, 2])
    c[0].selectbox("Layer", range(facts.n_layers), key=Explorer.LAYER, on_change=on_selectors,
                   args=(key,))
    c[1].selectbox("Head", range(facts.n_heads), key=Explorer.HEAD, on_change=on_selectors,
                   args=(key,))
    c[2].selectbox("Token (query)", range(run.n_tokens), key=Explorer.TOKEN,
                   format_func=lambda i: labels[i], on_change=on_selectors, args=(key,))


def weighting_toggle(view: ExplorerView, run: AttentionRun, key: RunKey) -> Any:
    """The value-weighting toggle; the run's weighting while on (None while off or computing)."""
    st.session_state[Explorer.WEIGHTED] = view.weighted
    on = st.toggle("Value-weighted: how much each head writes from each key",
                   key=Explorer.WEIGHTED, on_change=on_options,
                   help="Each weight A[i, j] times ||v_j W_O|| (the size of what the head writes "
                        "when it reads key j), rows renormalised to sum to 1 (Kobayashi et al. "
                        "2020). A sink the head looks at but writes almost nothing from fades.")
    if not on:
        return None
    try:
        found = job_view.run_job(
            WeightingKey(key), "Weighting every head by its values",
            results.weighting_work(key),
            cost=Cost(work=run.facts.forward_flops(run.n_tokens), rate="weighting"))
    except UserError as err:
        session.show_error(err)
        return None
    return None if found is job_view.MISSING else found


def grid(view: ExplorerView, run: AttentionRun, key: RunKey, weighted: bool) -> None:
    ss = st.session_state
    st.subheader("All heads")
    st.caption("Each picture is one head's whole pattern (rows: queries, columns: keys), "
               "max-pooled and scaled to its own strongest weight. Click one to open it.")
    cells = results.thumbnails(key, weighted)
    shown = (key, weighted)
    if ss.get(Explorer.GRID_SHOWN) == shown:
        cells = None  # this rerun only moves the selection: keep the pictures off the wire
    ss[Explorer.GRID_SHOWN] = shown
    n_heads = run.facts.n_heads
    cell = 72 if n_heads <= 6 else 52 if n_heads <= 12 else 36
    components.head_grid(cells, n_heads, str(view.head), Explorer.GRID,
                         lambda: on_head_click(key), cell_px=cell)


def tokens(view: ExplorerView, run: AttentionRun, key: RunKey, labels: list[str],
           weighting: Any) -> None:
    """The prompt coloured by attention from (or to) the selected token, with its controls."""
    ss = st.session_state
    st.subheader("Tokens")
    ss[Explorer.SCOPE], ss[Explorer.DIRECTION] = view.scope, view.direction
    c = st.columns([2, 2, 3])
    c[0].radio("Colour by", list(SCOPES), key=Explorer.SCOPE, format_func=SCOPES.__getitem__,
               on_change=on_options)
    c[1].radio("Show", list(DIRECTIONS), key=Explorer.DIRECTION,
               format_func=DIRECTIONS.__getitem__, on_change=on_options)
    weights = scoped_weights(run, view.scope, view.head.layer, view.head.index, view.query,
                             view.direction, weighting)
    with c[2]:
        st.html(legend_html(weights))
        st.caption(f"Selected: {md(labels[view.query])}. Click a token to select it.")
    components.token_strip(token_spans(run.tokens, weights, view.query, view.direction),
                           Explorer.TOKENS, lambda: on_token_click(key))


@st.fragment
def explorer_view(key: RunKey) -> None:
    """The whole interactive view; reruns alone on every click.

    Takes the run's key, not the run: Streamlit keeps a fragment's arguments for as long as the
    browser session lingers, which would pin a long prompt's q and k in memory after the shared
    store had let it go. A run the store has dropped is captured again through the pool.
    """
    run = results.run_or_recapture(key)
    if run is None:
        return
    view = seed(run, key)
    labels = run.labels()
    selectors(view, run.facts, run, key, labels)
    weighting = weighting_toggle(view, run, key)
    left, right = st.columns([1, 1])
    with left:
        grid(view, run, key, weighting is not None)
    with right:
        st.subheader(f"Head {view.head}")
        detail.detail(view, run, key, labels, weighting)
    tokens(current_view(), run, key, labels, weighting)
    view = current_view()
    components.sync_url(session.link_query(
        ViewState(layer=view.head.layer, head=view.head.index, token=view.token), key.prompt))
