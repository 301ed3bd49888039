"""The chosen head in compare mode: A, B and A − B on aligned positions, one window for all three,
and both prompts' strips.

The view's window and selected token are prompt A's token positions (as in single mode); they
are mapped onto aligned positions here (:func:`ui.state.explorer.aligned_range`), so the
overview, the jump button and a click in A's strip move all three heatmaps together.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import streamlit as st

from models.capture.alignment import Side, aligned_labels
from models.capture.compare import jensen_shannon
from models.capture.difference import aligned_rows, difference_window
from models.capture.overview import OVERVIEW
from models.capture.run import AttentionRun
from models.capture.words import Words, unit_range
from models.errors import UserError
from ui import session
from ui.keys import Explorer
from ui.runtime import server
from ui.runtime.job_keys import CompareKey, RunKey
from ui.sections import explorer_detail as detail
from ui.sections import explorer_difference as difference
from ui.sections import explorer_strip as strip
from ui.sections.explorer_difference import Pair
from ui.sections.explorer_session import current_view, save, shape_of
from ui.session_state import seed_widgets
from ui.state import explorer as state
from ui.state.explorer import ExplorerView, unit_of
from ui.text import md
from ui.widgets import components, job_view
from ui.widgets.canvas_heatmap import canvas_heatmap
from viz.heatmap import HeatmapData, canvas_data, heatmap_data, signed_axis
from viz.token_view import legend_html

DIFFERENCE = "A − B"  # what a cell of the difference holds


@dataclass(frozen=True)
class Figures:
    """The three heatmaps of the window, as data the page's canvas draws (and an export's
    plotly figure is built from)."""

    a: HeatmapData
    b: HeatmapData
    difference: HeatmapData
    selected: int | None  # aligned index of the selected query
    top: float  # the difference scale runs from -top to +top


def windows(view: ExplorerView, pair: Pair) -> tuple[range, range]:
    """The detail window on aligned positions: the aligned queries and keys whose prompt-A
    units lie in the view's window."""
    shape = shape_of(pair.run_a, pair.key_a)
    rows = state.aligned_range(pair.query_axis(), unit_range(view.rows(shape), pair.words_a))
    cols = state.aligned_range(pair.key_axis(), unit_range(view.cols(shape), pair.words_a))
    return rows, cols


def largest(values: np.ndarray, cols: range, skip_first: bool) -> float:
    """The largest finite value, leaving aligned key 0 out when asked."""
    part = values[:, 1:] if skip_first and cols.start == 0 and values.shape[1] > 1 else values
    finite = part[np.isfinite(part)]
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def figures(view: ExplorerView, pair: Pair) -> Figures | None:
    """A, B (one colour scale for both) and A − B (centred on zero) of the view's window."""
    rows, cols = windows(view, pair)
    if not rows or not cols:
        return None
    head = view.head
    a, b, diff = difference_window(
        pair.run_a,
        pair.run_b,
        pair.alignment,
        head.layer,
        head.index,
        slice(rows.start, rows.stop),
        slice(cols.start, cols.stop),
        pair.words_a,
        pair.words_b,
    )
    row_labels = aligned_labels(pair.alignment, pair.names("a"), pair.names("b"))
    key_labels = aligned_labels(pair.alignment, pair.names("a"), pair.names("b"), keys=True)
    unit = unit_of(view.query, pair.words_a)
    selected = state.aligned_index(pair.query_axis(), unit)
    # The selected token is outlined as a query (its row) or, when the view shows which
    # tokens attend to it, as a key (its column).
    row = selected if view.direction == "from" else None
    col = state.aligned_index(pair.key_axis(), unit) if view.direction == "to" else None
    top = (
        1.0
        if view.colour_range == "unit"
        else max(largest(a, cols, view.skip_first), largest(b, cols, view.skip_first))
    )
    labels, offset = row_labels + key_labels, len(row_labels)
    window = partial(  # the same window, labels and outlines for all three
        heatmap_data,
        labels=labels,
        causal=False,
        selected=row,
        selected_key=None if col is None else offset + col,
        rows=slice(rows.start, rows.stop),
        cols=[offset + c for c in cols],
    )
    a_data, b_data = (
        window(values, zmax=top, scale=view.scale, value_name=f"weight in {side}")
        for values, side in ((a, "A"), (b, "B"))
    )
    spread = largest(np.abs(diff), cols, view.skip_first)
    signed = window(diff, signed=True)  # its colours then run over ±spread (key 0 aside)
    axis = signed_axis(np.array([spread]), DIFFERENCE)
    difference = replace(signed, axis=axis, value_name=DIFFERENCE)
    return Figures(a_data, b_data, difference, selected, spread)


def on_jump_difference(key: RunKey, query: int, column: int) -> None:
    run = server.current().results.get(key)
    if run is not None:
        save(state.centre_on(current_view(), shape_of(run, key), query, column))


def difference_picker(view: ExplorerView, pair: Pair, compare: CompareKey) -> bool:
    """The whole |A − B| of this head as the overview that moves the window (a job; False
    while it runs or when it failed)."""
    shape = shape_of(pair.run_a, pair.key_a)
    try:
        found = job_view.run_job(
            difference.key_for(compare, view.head),
            f"Finding where A and B differ in head {view.head}",
            difference.work(pair, view.head, OVERVIEW),
            cost=difference.cost(pair, OVERVIEW),
        )
    except UserError as err:
        session.show_error(err)
        return False
    if found is job_view.MISSING:
        return False
    rows, cols, n = view.rows(shape), view.cols(shape), shape.n_tokens
    components.overview(
        found.src,
        n,
        (rows.start, rows.stop),
        (cols.start, cols.stop),
        Explorer.OVERVIEW,
        lambda: detail.on_overview_pick(shape),
        size=OVERVIEW,
        caption=f"Where A and B differ: this head's |A − B| over the whole prompt ({n:,} × "
        f"{n:,} of A's positions), max-pooled; darkest = {found.top:.3g}. Click to "
        "centre the detail window, drag to choose its rows and keys.",
    )
    st.button(
        "Jump to where A and B differ most",
        key=Explorer.JUMP_DIFFERENCE,
        type="primary",
        on_click=on_jump_difference,
        args=(pair.key_a, found.query, found.key),
    )
    return True


def options(view: ExplorerView, pair: Pair, compare: CompareKey) -> None:
    """The overview of where A and B differ (long prompts) and the colour options."""
    shape = shape_of(pair.run_a, pair.key_a)
    left, right = st.columns([2, 3]) if shape.long else (None, st.container())
    if left is not None:
        with left:
            if not difference_picker(view, pair, compare):
                detail.overview_picker(view, pair.key_a, shape, False)
    with right:
        detail.colour_options(view, False)
        if shape.long:
            st.button(
                "Jump to where this query attends most (in A)",
                key=Explorer.JUMP,
                on_click=detail.on_jump,
                args=(pair.key_a,),
            )
            st.caption(
                detail.window_caption(view, shape, pair.words_a) + " Prompt A's "
                "positions; B's aligned positions are shown beside them."
            )


def head_view(view: ExplorerView, pair: Pair, mean: float, compare: CompareKey) -> Figures | None:
    """A and B side by side, then A − B beside both prompts' strips."""
    options(view, pair, compare)
    found = figures(view, pair)
    if found is None:
        st.info(
            "The detail window holds no aligned position (only tokens of A that B lacks): "
            "move it with the overview."
        )
        strips(view, pair, None, mean)
        return None
    name = f"compare_L{view.head.layer}_H{view.head.index}"
    for column, side, data, key in zip(
        st.columns(2),
        ("A", "B"),
        (found.a, found.b),
        (Explorer.HEATMAP_A, Explorer.HEATMAP_B),
        strict=True,
    ):
        column.markdown(f"**Prompt {side}**")
        with column:
            canvas_heatmap(canvas_data(data), key, f"{name}_{side}", f"Head {view.head}: {side}")
    left, right = st.columns(2)
    with left:
        st.markdown("**A − B**")
        canvas_heatmap(
            canvas_data(found.difference),
            Explorer.HEATMAP_DIFF,
            f"{name}_A-B",
            f"Head {view.head}: A − B",
        )
        range_note = " without key 0" if view.skip_first else ""
        st.caption(
            f"Red where A attends more, blue where B does, white where they agree; the "
            f"colours run from −{found.top:.3g} to +{found.top:.3g} (the largest "
            f"difference shown{range_note}). A and B above share one colour scale."
        )
    with right:
        strips(view, pair, found, mean)
    return found


def row_divergence(view: ExplorerView, pair: Pair, selected: int) -> float:
    """JSD (bits) between A's and B's whole rows at one aligned query."""
    one = slice(selected, selected + 1)
    sides: tuple[tuple[AttentionRun, Side, Words | None], ...] = (
        (pair.run_a, "a", pair.words_a),
        (pair.run_b, "b", pair.words_b),
    )
    rows = [
        aligned_rows(run, pair.alignment, side, view.head.layer, view.head.index, one, words)
        for run, side, words in sides
    ]
    return float(jensen_shannon(rows[0], rows[1])[0])


def strips(view: ExplorerView, pair: Pair, found: Figures | None, mean: float) -> np.ndarray:
    """Prompt A's and B's strips coloured by this head's attention from (or to) the selected
    query and its aligned twin; returns A's weights."""
    st.subheader("Tokens of A and B" if pair.words_a is None else "Words of A and B")
    seed_widgets({Explorer.DIRECTION: view.direction})
    st.radio(
        "Show",
        list(strip.DIRECTIONS),
        key=Explorer.DIRECTION,
        horizontal=True,
        format_func=strip.DIRECTIONS.__getitem__,
        on_change=strip.on_direction,
        args=(pair.key_a,),
    )
    selected = (
        found.selected
        if found is not None
        else state.aligned_index(pair.query_axis(), unit_of(view.query, pair.words_a))
    )
    one = replace(view, scope="head", span=None)
    weights_a = strip.attention_weights(one, pair.run_a, None, pair.words_a)
    unit_a = unit_of(view.query, pair.words_a)
    if selected is None:
        st.caption("The selected query is not aligned (B has nothing there): it has no twin in B.")
    else:
        st.caption(
            f"At the selected query, A's and B's rows of head {view.head} differ by "
            f"{row_divergence(view, pair, selected):.4f} bits (this head's mean over "
            f"aligned queries: {mean:.4f}). {strip.HOW.split(';')[0]}."
        )
    st.caption(
        f"Prompt A, this head, {strip.DIRECTIONS[view.direction].lower()} "
        f"({md(pair.names('a')[unit_a])}):"
    )
    st.html(legend_html(weights_a))
    components.token_strip(
        components.shaded(pair.names("a"), weights_a, unit_a, view.direction),
        Explorer.TOKENS,
        lambda: strip.on_click(pair.key_a, pair.words_a is not None),
    )
    if selected is not None:
        unit_b = int(pair.alignment.positions("b")[selected])
        token_b = unit_b if pair.words_b is None else pair.words_b.starts[unit_b]
        weights_b = strip.attention_weights(
            replace(one, token=token_b), pair.run_b, None, pair.words_b
        )
        st.caption(f"Prompt B, the same for its aligned position ({md(pair.names('b')[unit_b])}):")
        st.html(legend_html(weights_b))
        components.token_strip(
            components.shaded(pair.names("b"), weights_b, unit_b, view.direction),
            Explorer.TOKENS_B,
            lambda: None,
        )
    return weights_a
