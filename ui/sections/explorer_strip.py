"""The explorer's token strip: the prompt (or its words) coloured by attention from or to the
selected token or span, or by attention rollout through every layer.

A click selects one token (or word); a drag across several, or a shift-click, selects a span.
The strip reports positions in what it shows (tokens or words); the callbacks turn them into
token positions, the unit the view keeps.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from models.capture.rollout import ROLLOUT_RULE, check_rollout, rollout_cost
from models.capture.run import AttentionRun
from models.capture.spans import SPAN_RULE, Direction, span_cost, span_weights
from models.capture.views import Scope, scoped_sink, scoped_weights
from models.capture.weighted import ValueWeighting
from models.capture.words import Words, unit_range
from models.cost import Cost
from models.errors import UserError
from models.progress import Progress
from ui import session
from ui.keys import Explorer
from ui.runtime import job_work, server
from ui.runtime.job_keys import RolloutKey, RunKey, SpanKey, WeightingKey
from ui.runtime.jobs import Work
from ui.sections import explorer_results as results
from ui.sections.explorer_session import current_view, save, strongest, update
from ui.session_state import seed_widgets
from ui.state import explorer as state
from ui.state.explorer import ExplorerView, unit_of
from ui.text import md
from ui.widgets import components, job_view
from viz.token_view import legend_html

SCOPES: dict[Scope, str] = {
    "head": "This head",
    "layer": "Mean over the layer's heads",
    "all": "Mean over all heads",
}
DIRECTIONS: dict[Direction, str] = {
    "from": "What the token attends to",
    "to": "Which tokens attend to it",
}
SINK_RULE = (
    "“sink”, before the tokens: {share:.3g} of this attention goes to the head's learned sink, "
    "which is no token; it and the tokens' weights sum to 1."
)
SINK_WEIGHTED = (
    "“sink”, before the tokens: the head's learned sink has no value, so it adds nothing (0) "
    "to the value-weighted view."
)
HOW = "Click to select; drag across tokens, or shift-click, to select a span."


def to_token(run_key: RunKey, unit: int, words: bool) -> int:
    """The token position of a unit the strip reported (a word's first token)."""
    if not words:
        return unit
    found = results.words_of(run_key)
    return found.starts[min(max(unit, 0), found.n_words)]


def on_click(run_key: RunKey, words: bool, key: str = Explorer.TOKENS) -> None:
    clicked = components.clicked_position(key)
    if clicked is not None:
        token = to_token(run_key, int(clicked), words)
        update(run_key, lambda v, s, r: state.choose_token(v, token, s, strongest(r)))


def on_span(run_key: RunKey, words: bool) -> None:
    picked = components.picked_positions(Explorer.TOKENS, "span")
    if picked:
        start = to_token(run_key, int(picked["start"]), words)
        stop = to_token(run_key, int(picked["stop"]), words)
        update(run_key, lambda v, s, r: state.choose_span(v, start, stop, s, strongest(r)))


def on_direction(run_key: RunKey) -> None:
    direction = st.session_state.get(Explorer.DIRECTION) or current_view().direction
    update(run_key, lambda v, s, r: state.set_direction(v, direction, s, strongest(r)))


def on_options() -> None:
    ss, view = st.session_state, current_view()
    save(
        replace(
            view,
            scope=ss.get(Explorer.SCOPE, view.scope),
            direction=ss.get(Explorer.DIRECTION, view.direction),
            weighted=bool(ss.get(Explorer.WEIGHTED, view.weighted)),
            rollout=bool(ss.get(Explorer.ROLLOUT, view.rollout)),
        )
    )


def selected_units(view: ExplorerView, words: Words | None) -> slice:
    """The selection (span, or the query token) in units shown."""
    start, stop = state.selection(view)
    shown = unit_range(range(start, stop), words)
    return slice(shown.start, shown.stop)


def attention_weights(
    view: ExplorerView, run: AttentionRun, weighting: ValueWeighting | None, words: Words | None
) -> np.ndarray:
    """One weight per unit: attention from (or to) the selection, in the chosen scope (in the
    page: for one token, or words of one head; a span goes through :func:`span_job`)."""
    head = view.head
    if words is None and view.span is None:
        return scoped_weights(
            run, view.scope, head.layer, head.index, view.query, view.direction, weighting
        )
    return span_weights(
        run,
        view.scope,
        head.layer,
        head.index,
        selected_units(view, words),
        view.direction,
        words,
        weighting,
    )


def span_work(key: SpanKey) -> Work[np.ndarray]:
    def work(_progress: Progress) -> np.ndarray:
        run = server.current().results.get(key.run)
        weighting = server.current().results.get(WeightingKey(key.run)) if key.weighted else None
        if run is None or (key.weighted and weighting is None):
            raise LookupError("the run is no longer stored")
        words = results.words_of(key.run) if key.words else None
        return job_work.span_of(run, key, words, weighting)

    return work


def span_key(view: ExplorerView, key: RunKey, weighted: bool, words: bool) -> SpanKey:
    """The job that colours the strip for ``view``'s span."""
    return SpanKey(
        key, view.scope, view.head, state.selection(view), view.direction, words, weighted
    )


def span_job(
    view: ExplorerView, run: AttentionRun, key: RunKey, weighted: bool, words: Words | None
) -> np.ndarray | None:
    """The strip's weights for a selected span, as a job priced before it starts (a span over
    a long prompt, over every head, reads the whole of every pattern), or None (refused with
    the reason, or running)."""
    skey = span_key(view, key, weighted, words is not None)

    def cost_at(n_span: int) -> Cost:
        return span_cost(run.facts, run.n_tokens, n_span, view.scope, run.factored, weighted)

    n_span = skey.span[1] - skey.span[0]
    try:
        found = job_view.run_job(
            skey,
            "Attention over the selected span",
            span_work(skey),
            cost=cost_at(n_span),
            scale=job_view.Scale(cost_at, n_span, "tokens in the span"),
        )
    except UserError as err:
        session.show_error(err)
        return None
    return None if found is job_view.MISSING else found


def rollout_work(key: RolloutKey) -> Work[np.ndarray]:
    def work(progress: Progress) -> np.ndarray:
        run = server.current().results.get(key.run)
        if run is None:
            raise LookupError("the run is no longer stored")
        words = results.words_of(key.run) if key.words else None
        return job_work.rollout_of(run, key, words, progress)

    return work


def rollout(
    view: ExplorerView, run: AttentionRun, key: RunKey, words: Words | None
) -> np.ndarray | None:
    """Rollout from (or to) the selection, or None (refused with the reason, or running)."""
    try:
        check_rollout(run)
        rkey = RolloutKey(key, state.selection(view), view.direction, words is not None)
        cost = rollout_cost(run.facts, run.n_tokens, factored=run.factored)
        found = job_view.run_job(
            rkey,
            "Attention rollout through every layer",
            rollout_work(rkey),
            cost=cost,
        )
    except UserError as err:
        session.show_error(err)
        return None
    return None if found is job_view.MISSING else found


def signed(view: ExplorerView, run: AttentionRun, rolled_out: bool) -> bool:
    """Whether the strip holds a linear-attention layer's signed mixing entries (one head or
    the layer's mean, not a rollout): shaded red and blue, not as weights."""
    return not rolled_out and view.scope != "all" and run.signed(view.head.layer)


def sink_share(
    view: ExplorerView, run: AttentionRun, weighted: bool, rolled_out: bool
) -> float | None:
    """The learned sinks' share of the selection's attention (what the strip shows as its
    "sink" item), or None: no learned sink in the scope, a rollout, or the "to" direction (the
    sink is no token, so nothing attends to a token through it). Value-weighted, the sink is 0:
    it has no value."""
    if rolled_out or view.direction != "from" or signed(view, run, False):
        return None
    start, stop = state.selection(view)
    share = scoped_sink(run, view.scope, view.head.layer, view.head.index, slice(start, stop))
    return None if share is None else 0.0 if weighted else share


def selection_text(view: ExplorerView, names: list[str], words: Words | None) -> str:
    units = selected_units(view, words)
    kind = "words" if words is not None else "tokens"
    if units.stop - units.start <= 1:
        return f"Selected: “{md(names[units.start])}”."
    text = (" " if words is not None else "").join(names[units.start : units.stop])
    short = text if len(text) <= 60 else text[:57] + "…"
    return f"Selected: {kind} {units.start}–{units.stop - 1}, “{md(short)}”."


def options(view: ExplorerView, key: RunKey, rollout_on: bool, rolled: bool) -> DeltaGenerator:
    """The strip's colour and direction options; returns the column for the legend."""
    seed_widgets(
        {
            Explorer.SCOPE: view.scope,
            Explorer.DIRECTION: view.direction,
            Explorer.ROLLOUT: rollout_on,
        }
    )
    c = st.columns([2, 2, 3])
    c[0].radio(
        "Colour by",
        list(SCOPES),
        key=Explorer.SCOPE,
        format_func=SCOPES.__getitem__,
        on_change=on_options,
        disabled=rolled,
    )
    c[0].toggle(
        "Attention rollout (all layers)",
        key=Explorer.ROLLOUT,
        on_change=on_options,
        help=ROLLOUT_RULE,
    )
    c[1].radio(
        "Show",
        list(DIRECTIONS),
        key=Explorer.DIRECTION,
        format_func=DIRECTIONS.__getitem__,
        on_change=on_direction,
        args=(key,),
    )
    return c[2]


def strip(
    view: ExplorerView,
    run: AttentionRun,
    key: RunKey,
    weighting: ValueWeighting | None,
    words: Words | None,
) -> np.ndarray:
    """The strip with its options; returns the weights it was coloured with."""
    st.subheader("Words" if words is not None else "Tokens")
    rolled = rollout(view, run, key, words) if view.rollout else None
    legend = options(view, key, view.rollout, rolled is not None)
    names = list(words.labels) if words is not None else list(run.tokens)
    if rolled is not None:
        weights = rolled
    elif view.span is not None:
        spanned = span_job(view, run, key, weighting is not None, words)
        weights = spanned if spanned is not None else np.full(len(names), np.nan)
    else:
        weights = attention_weights(view, run, weighting, words)
    sink = sink_share(view, run, weighting is not None, rolled is not None)
    with legend:
        st.html(legend_html(weights, signed(view, run, rolled is not None)))
        if sink is not None:
            st.caption(SINK_WEIGHTED if weighting is not None else SINK_RULE.format(share=sink))
        st.caption(f"{selection_text(view, names, words)} {HOW}")
        if rolled is not None:
            st.caption(ROLLOUT_RULE)
        elif view.rollout:
            st.caption("Without rollout, the strip shows this head's attention instead.")
        if rolled is None and view.span is not None:
            st.caption(SPAN_RULE)
    units = selected_units(view, words)
    components.token_strip(
        components.shaded(
            names,
            weights,
            unit_of(view.query, words),
            view.direction,
            signed(view, run, rolled is not None),
            sink,
        ),
        Explorer.TOKENS,
        lambda: on_click(key, words is not None),
        lambda: on_span(key, words is not None),
        span=(units.start, units.stop) if view.span is not None else None,
        anchor=unit_of(view.query, words),
    )
    if words is None:
        gate_strip(view, run, key, names)
    return weights


def gate_strip(view: ExplorerView, run: AttentionRun, key: RunKey, names: list[str]) -> None:
    """A gated head (Qwen3-Next, Qwen3.5): its output gate at every query, as a second strip
    (a click selects that query)."""
    gates = run.extras.mean_gate(view.head.layer) if run.extras is not None else None
    if gates is None:
        return
    gate = gates[view.head.index]
    st.caption(
        f"Output gate of head {view.head} at each query: sigmoid of the gate, mean over its "
        f"dimensions (0 blocks what the head read, 1 passes it on). At the selected query "
        f"{view.query}: **{gate[view.query]:.3g}**; over the prompt "
        f"{float(gate.min()):.3g}–{float(gate.max()):.3g}."
    )
    components.token_strip(
        components.shaded(names, gate, view.query, "from", verb="output gate at this query"),
        Explorer.GATES,
        lambda: on_click(key, False, Explorer.GATES),
    )
