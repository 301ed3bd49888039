"""The explorer's chosen head in detail: the whole-pattern overview (long prompts), the colour
options, the detail heatmap (tokens, or words in the word view) and its downloads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import streamlit as st

from models.capture.overview import OVERVIEW
from models.capture.run import AttentionRun
from models.capture.weighted import ValueWeighting
from models.capture.words import (
    Words,
    local_starts,
    merge_keys,
    merge_pattern,
    merge_queries,
    unit_range,
    word_window,
)
from models.head import Head
from models.model.variants.sinks import SINK_KEY
from ui.keys import Explorer
from ui.runtime import server
from ui.runtime.job_keys import RunKey
from ui.sections import explorer_results as results
from ui.sections.explorer_session import current_view, save, shape_of, strongest
from ui.session_state import seed_widgets
from ui.state import explorer as state
from ui.state.explorer import WINDOW, ExplorerView, RunShape, unit_of
from ui.widgets import components, job_view
from ui.widgets.canvas_heatmap import canvas_heatmap
from viz.export import pattern_csv
from viz.heatmap import ColourScale, HeatmapData, canvas_data, heatmap_data, masked

SCALES: dict[ColourScale, str] = {"sqrt": "Square root", "linear": "Linear", "log": "Log"}
RANGES: dict[state.ColourRange, str] = {
    "unit": "0 to 1",
    "view": "This view's largest weight",
    "rest": "Its largest weight beyond key 0",
}
WHOLE_CSV_TOKENS = 1024  # a whole pattern up to 1,024² cells (~10 MB of CSV); windows beyond


def on_colour() -> None:
    ss, view = st.session_state, current_view()
    save(
        replace(
            view,
            scale=ss.get(Explorer.SCALE, view.scale),
            colour_range=ss.get(Explorer.RANGE, view.colour_range),
            pin_sinks=bool(ss.get(Explorer.PIN, view.pin_sinks)),
        )
    )


def on_overview_pick(shape: RunShape) -> None:
    picked = components.picked_positions(Explorer.OVERVIEW, "picked")
    if not picked:
        return
    q0, q1, k0, k1 = (int(picked[name]) for name in ("q0", "q1", "k0", "k1"))
    save(state.pick_overview(current_view(), shape, q0, q1, k0, k1))


def on_jump(key: RunKey) -> None:
    run = server.current().results.get(key)
    if run is not None:
        save(state.jump_to_strongest(current_view(), shape_of(run, key), strongest(run)))


def colour_options(view: ExplorerView, long: bool, signed: bool = False) -> None:
    """The colour scale and range of attention weights; ``signed`` (a linear-attention layer's
    mixing matrix, drawn from -max|M| to +max|M|) shows them unavailable, with why."""
    seed_widgets(
        {
            Explorer.SCALE: view.scale,
            Explorer.RANGE: view.colour_range,
            Explorer.PIN: view.pin_sinks,
        }
    )
    c = st.columns(2)
    c[0].selectbox(
        "Colour scale",
        list(SCALES),
        key=Explorer.SCALE,
        format_func=SCALES.__getitem__,
        on_change=on_colour,
        disabled=signed,
        help="Square root and log bring out small weights.",
    )
    c[1].selectbox(
        "Colour range",
        list(RANGES),
        key=Explorer.RANGE,
        format_func=RANGES.__getitem__,
        on_change=on_colour,
        disabled=signed,
        help="Most heads park weight on the first token (a sink); leaving it out of "
        "the colour range lets the rest of the pattern use the whole range.",
    )
    if signed:
        st.caption(
            "This layer's signed mixing matrix is drawn on a linear scale from −max|M| to "
            "+max|M|; the scale and range choices apply to attention weights."
        )
    if long:
        st.checkbox(
            "Pin key 0 and the strongest sink",
            key=Explorer.PIN,
            on_change=on_colour,
            help="Always show the first token and this head's strongest sink as "
            "columns before the detail window.",
        )


def read(
    run: AttentionRun, weighting: ValueWeighting | None, head: Head, rows: slice, cols: slice
) -> np.ndarray:
    """A window of one head's pattern, value-weighted when ``weighting`` is given; for a
    linear-attention layer, its signed mixing matrix (never weighted)."""
    if run.signed(head.layer):
        return run.drawn(head.layer, head.index, rows, cols)
    window = run.window(head.layer, head.index, rows, cols)
    if weighting is None:
        return window
    weighted: np.ndarray = window * weighting.scale(head.layer, head.index, rows, cols)
    return weighted


def read_units(
    run: AttentionRun,
    weighting: ValueWeighting | None,
    head: Head,
    rows: range,
    cols: range,
    words: Words | None,
) -> np.ndarray:
    """A window of units (tokens, or words: to a word = sum, from a word = mean)."""
    row_slice, col_slice = slice(rows.start, rows.stop), slice(cols.start, cols.stop)
    if words is None:
        return read(run, weighting, head, row_slice, col_slice)
    if weighting is None:
        return word_window(run, words, head.layer, head.index, row_slice, col_slice)
    window = read(run, weighting, head, words.tokens_of(row_slice), words.tokens_of(col_slice))
    return merge_queries(
        merge_keys(window, local_starts(words, col_slice)), local_starts(words, row_slice)
    )


def sink_column(
    run: AttentionRun,
    weighting: ValueWeighting | None,
    head: Head,
    rows: range,
    words: Words | None,
) -> np.ndarray | None:
    """``row 1``: each row's weight on the head's learned sink (a word row: the mean over its
    tokens), or None when the head has none. Value-weighted, the sink is 0: it has no value
    and adds nothing to the head's output."""
    row_slice = slice(rows.start, rows.stop)
    tokens = row_slice if words is None else words.tokens_of(row_slice)
    sink = run.sink(head.layer, head.index, tokens)
    if sink is None:
        return None
    column = np.zeros_like(sink) if weighting is not None else sink
    if words is None:
        return np.asarray(column, dtype=np.float32)[:, None]
    merged: np.ndarray = merge_queries(column[:, None], local_starts(words, row_slice))
    return merged


def pinned_keys(key: RunKey, head: Head, cols: range, words: Words | None = None) -> list[int]:
    """Sink keys shown before the window: key 0 and this head's strongest sink (or their
    words), if outside it."""
    sink = results.sink_key(key, head)
    keys = {unit_of(0, words)} | (set() if sink is None else {unit_of(sink, words)})
    return sorted(k for k in keys if k not in cols)


@dataclass(frozen=True)
class Shown:
    """The detail heatmap and what it was drawn from (rows and columns in units)."""

    heatmap: HeatmapData
    window: np.ndarray  # the weights drawn, pinned columns first, NaN where masked
    rows: range
    cols: range
    names: list[str]
    keys: list[int]  # the unit of each column drawn: a learned sink (SINK_KEY), pinned sinks


def detail_heatmap(
    view: ExplorerView,
    run: AttentionRun,
    key: RunKey,
    weighting: ValueWeighting | None,
    words: Words | None,
) -> Shown:
    """The chosen head's detail heatmap as data: the window (as words in the word view), sink
    keys pinned before it on long prompts, and a head's learned sink as the first column
    (labelled "sink": the row plus it sums to 1); a sliding layer's keys past the window's
    edge are blank."""
    shape = shape_of(run, key)
    rows, cols = unit_range(view.rows(shape), words), unit_range(view.cols(shape), words)
    pins = pinned_keys(key, view.head, cols, words) if shape.long and view.pin_sinks else []
    sink = sink_column(run, weighting, view.head, rows, words)
    if sink is not None:
        pins = [SINK_KEY, *pins]
    pattern = np.concatenate(
        ([] if sink is None else [sink])
        + [
            read_units(run, weighting, view.head, rows, range(k, k + 1), words)
            for k in pins
            if k != SINK_KEY
        ]
        + [read_units(run, weighting, view.head, rows, cols, words)],
        axis=1,
    )
    # a sliding window in words has no fixed width: only the token view blanks past its edge
    window = run.window_of(view.head.layer) if words is None else None
    word = "value-weighted weight" if weighting is not None else "weight"
    labels = words.axis_labels() if words is not None else run.labels()
    drawn = heatmap_data(
        pattern,
        labels,
        causal=run.facts.causal,
        title="",
        zmax=1.0 if view.colour_range == "unit" else None,
        # The selected token is a query ("what it attends to") or a key ("which tokens
        # attend to it"): its row or its column is outlined.
        selected=unit_of(view.query, words) if view.direction == "from" else None,
        selected_key=unit_of(view.query, words) if view.direction == "to" else None,
        rows=slice(rows.start, rows.stop),
        cols=pins + list(cols),
        scale=view.scale,
        skip_first=view.skip_first,
        pinned=len(pins),
        value_name=word,
        signed=run.signed(view.head.layer),
        window=window,
    )
    names = list(words.labels) if words is not None else list(run.tokens)
    keys = pins + list(cols)
    shown = masked(pattern, run.facts.causal, rows.start, keys, window)
    return Shown(drawn, shown, rows, cols, names, keys)


def window_caption(view: ExplorerView, shape: RunShape, words: Words | None) -> str:
    rows, cols = view.rows(shape), view.cols(shape)
    text = (
        f"Detail: queries {rows.start}–{rows.stop - 1}, keys {cols.start}–{cols.stop - 1} "
        f"of {shape.n_tokens:,}"
    )
    if words is None:
        return text + "."
    w_rows, w_cols = unit_range(rows, words), unit_range(cols, words)
    return (
        text + f" tokens, shown as words {w_rows.start}–{w_rows.stop - 1} by "
        f"{w_cols.start}–{w_cols.stop - 1} of {words.n_words:,}."
    )


def controls(view: ExplorerView, run: AttentionRun, key: RunKey, weighted: bool) -> None:
    """Beside the grid: the chosen head's overview (long prompts) and the colour options."""
    shape = shape_of(run, key)
    signed = run.signed(view.head.layer)
    if not shape.long:
        colour_options(view, False, signed)
        return
    overview_picker(view, key, shape, weighted)  # stacked: the grid beside is as tall
    colour_options(view, True, signed)
    st.button(
        "Jump to where this query attends most",
        key=Explorer.JUMP,
        on_click=on_jump,
        args=(key,),
    )


def detail(
    view: ExplorerView,
    run: AttentionRun,
    key: RunKey,
    weighting: ValueWeighting | None,
    words: Words | None = None,
    on_cell: Callable[[Shown], Callable[[], None]] | None = None,
) -> Shown:
    """The detail heatmap of the selected head (the page's full width) and its downloads;
    ``on_cell(shown)`` gives the callback a click on a cell calls (None: cells do not click)."""
    shape = shape_of(run, key)
    if shape.long:
        st.caption(window_caption(view, shape, words))
    shown = detail_heatmap(view, run, key, weighting, words)
    canvas_heatmap(
        canvas_data(shown.heatmap),
        Explorer.HEATMAP,
        file_name=f"head_{view.head.layer}_{view.head.index}",
        label=f"Head {view.head}: {shown.heatmap.value_name}s of queries "
        f"{shown.rows.start}–{shown.rows.stop - 1} over keys {shown.cols.start}–"
        f"{shown.cols.stop - 1}",
        on_click=None if on_cell is None else on_cell(shown),
    )
    downloads(view, run, key, shown, weighting is not None, words is not None)
    return shown


def overview_picker(view: ExplorerView, key: RunKey, shape: RunShape, weighted: bool) -> None:
    """The chosen head's whole pattern (prompt A's), with the detail window outlined."""
    rows, cols, n = view.rows(shape), view.cols(shape), shape.n_tokens
    picture = results.overview_png(key, view.head, weighted)
    if picture is job_view.MISSING:
        return  # its progress is shown; the page is drawn again when it is ready
    components.overview(
        picture,
        n,
        (rows.start, rows.stop),
        (cols.start, cols.stop),
        Explorer.OVERVIEW,
        lambda: on_overview_pick(shape),
        size=OVERVIEW,
        caption=f"Whole pattern, {n:,} × {n:,}, max-pooled. Click to centre the detail "
        "window, drag to choose its rows and keys.",
    )


def whole_csv(key: RunKey, head: Head, words: bool = False) -> str:
    """One head's whole pattern as CSV (in words for the word view), built when the button is
    pressed (from the key, so the button does not hold the run)."""
    run = server.current().results.get(key)
    if run is None:
        return "The prompt's patterns are no longer held by the server; open the view again.\n"
    every = slice(None)
    pattern = run.drawn(head.layer, head.index, every, every)  # a linear layer: its M
    causal = run.facts.causal
    if not words:
        return pattern_csv(masked(pattern, causal), run.tokens)
    found = results.words_of(key)
    return pattern_csv(masked(merge_pattern(pattern, found), causal), found.labels)


def downloads(
    view: ExplorerView, run: AttentionRun, key: RunKey, shown: Shown, weighted: bool, words: bool
) -> None:
    """The shown window as CSV at once; the whole pattern too when it is small enough."""
    head, rows, cols = view.head, shown.rows, shown.cols
    kind = ("value-weighted " if weighted else "") + ("word " if words else "")
    unit = "w" if words else ""
    row = st.container(horizontal=True)
    window = shown.window
    row.download_button(
        "Window shown (CSV)",
        lambda: pattern_csv(window, shown.names, rows, shown.keys),  # built when pressed
        help=f"The {kind}weights shown (pinned sink columns first, as drawn), with their "
        "labels; cells the query cannot see are left empty.",
        file_name=f"pattern_L{head.layer}_H{head.index}_"
        f"q{unit}{rows.start}-{rows.stop - 1}_"
        f"k{unit}{cols.start}-{cols.stop - 1}.csv",
        mime="text/csv",
        key=Explorer.CSV,
    )
    if run.n_tokens <= WHOLE_CSV_TOKENS and run.n_tokens > WINDOW:
        row.download_button(
            f"Whole {'word ' if words else ''}pattern (CSV)",
            lambda: whole_csv(key, head, words),
            help=f"This head's whole {kind}pattern, every query by every key.",
            file_name=f"pattern_L{head.layer}_H{head.index}{'_words' if words else ''}.csv",
            mime="text/csv",
        )
    elif run.n_tokens > WHOLE_CSV_TOKENS:
        row.caption(
            f"The whole pattern is {run.n_tokens:,}² cells: download windows instead "
            "(move the window with the overview)."
        )
