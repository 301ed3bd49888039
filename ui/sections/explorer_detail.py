"""The explorer's chosen head in detail: the whole-pattern overview (long prompts), the colour
options, the detail heatmap and its downloads."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import streamlit as st

from models.capture.run import AttentionRun
from models.head import Head
from ui.keys import Explorer
from ui.runtime import server
from ui.runtime.job_keys import RunKey
from ui.sections import explorer_results as results
from ui.sections.explorer_session import current_view, save, shape_of, strongest
from ui.state import explorer as state
from ui.state.explorer import WINDOW, ExplorerView, RunShape
from ui.widgets import components
from viz.export import pattern_csv
from viz.heatmap import head_heatmap

SCALES: dict[state.ColourScale, str] = {"sqrt": "Square root", "linear": "Linear", "log": "Log"}
RANGES: dict[state.ColourRange, str] = {"unit": "0 to 1", "view": "This view's largest weight"}
WHOLE_CSV_TOKENS = 1024  # a whole pattern up to 1,024² cells (~10 MB of CSV); windows beyond


def on_colour() -> None:
    ss, view = st.session_state, current_view()
    save(replace(view, scale=ss.get(Explorer.SCALE, view.scale),
                  colour_range=ss.get(Explorer.RANGE, view.colour_range),
                  skip_first=bool(ss.get(Explorer.SKIP_FIRST, view.skip_first)),
                  pin_sinks=bool(ss.get(Explorer.PIN, view.pin_sinks))))


def on_overview_pick(key: RunKey, n_tokens: int, n_layers: int, n_heads: int) -> None:
    picked = components.clicked_value(Explorer.OVERVIEW, "picked")
    if not picked:
        return
    q0, q1, k0, k1 = (int(picked[name]) for name in ("q0", "q1", "k0", "k1"))
    shape = RunShape(n_layers, n_heads, n_tokens, key)
    save(state.pick_overview(current_view(), shape, q0, q1, k0, k1))


def on_jump(key: RunKey) -> None:
    run = server.current().results.get(key)
    if run is not None:
        save(state.jump_to_strongest(current_view(), shape_of(run, key), strongest(run)))


def colour_options(view: ExplorerView, long: bool) -> None:
    ss = st.session_state
    ss[Explorer.SCALE], ss[Explorer.RANGE] = view.scale, view.colour_range
    ss[Explorer.SKIP_FIRST], ss[Explorer.PIN] = view.skip_first, view.pin_sinks
    c = st.columns(2)
    c[0].selectbox("Colour scale", list(SCALES), key=Explorer.SCALE,
                   format_func=SCALES.__getitem__, on_change=on_colour,
                   help="Square root and log bring out small weights.")
    c[1].selectbox("Colour range", list(RANGES), key=Explorer.RANGE,
                   format_func=RANGES.__getitem__, on_change=on_colour)
    st.checkbox("Range without key 0", key=Explorer.SKIP_FIRST,
                disabled=view.colour_range == "unit", on_change=on_colour,
                help="Most heads park weight on the first token (a sink); leaving it out of "
                     "the colour range lets the rest of the pattern use the whole range.")
    if long:
        st.checkbox("Pin key 0 and the strongest sink", key=Explorer.PIN, on_change=on_colour,
                    help="Always show the first token and this head's strongest sink as "
                         "columns before the detail window.")


def read(run: AttentionRun, weighting: Any, head: Head, rows: slice,
         cols: slice) -> np.ndarray:
    """A window of one head's pattern, value-weighted when ``weighting`` is given."""
    window = run.window(head.layer, head.index, rows, cols)
    if weighting is None:
        return window
    return window * weighting.scale(head.layer, head.index, rows, cols)


def pinned_keys(key: RunKey, head: Head, cols: range) -> list[int]:
    """Sink keys shown before the window: key 0 and this head's strongest sink, if outside it."""
    keys = {0, results.sink_key(key, head)}
    return sorted(k for k in keys if k not in cols)


def detail(view: ExplorerView, run: AttentionRun, key: RunKey, labels: list[str],
           weighting: Any) -> None:
    """Overview picker, colour options and the detail heatmap of the selected head."""
    shape = RunShape(run.facts.n_layers, run.facts.n_heads, run.n_tokens, key)
    n = run.n_tokens
    left, right = st.columns([2, 3]) if shape.long else (None, st.container())
    rows, cols = view.rows(shape), view.cols(shape)
    if left is not None:
        with left:
            components.overview(
                results.overview_png(key, view.head, weighting is not None), n,
                (rows.start, rows.stop), (cols.start, cols.stop), Explorer.OVERVIEW,
                lambda: on_overview_pick(key, n, shape.n_layers, shape.n_heads),
                size=results.OVERVIEW,
                caption=f"Whole pattern, {n:,} × {n:,}, max-pooled. Click to centre the detail "
                        "window, drag to choose its rows and keys.")
    with right:
        colour_options(view, shape.long)
        if shape.long:
            st.button("Jump to where this query attends most", key=Explorer.JUMP,
                      on_click=on_jump, args=(key,))
            st.caption(f"Detail: queries {rows.start}–{rows.stop - 1}, keys "
                       f"{cols.start}–{cols.stop - 1} of {n:,}.")
    pins = pinned_keys(key, view.head, cols) if shape.long and view.pin_sinks else []
    row_slice, col_slice = slice(rows.start, rows.stop), slice(cols.start, cols.stop)
    pattern = np.concatenate([read(run, weighting, view.head, row_slice, slice(k, k + 1))
                              for k in pins]
                             + [read(run, weighting, view.head, row_slice, col_slice)], axis=1)
    word = "value-weighted weight" if weighting is not None else "weight"
    fig = head_heatmap(pattern, labels, causal=run.facts.causal, title="",
                       zmax=1.0 if view.colour_range == "unit" else None, selected=view.query,
                       rows=row_slice, cols=pins + list(cols), scale=view.scale,
                       skip_first=view.skip_first, pinned=len(pins), value_name=word)
    st.plotly_chart(fig, width="stretch", key=Explorer.HEATMAP, config={
        "toImageButtonOptions": {"format": "png", "scale": 2,
                                 "filename": f"head_{view.head.layer}_{view.head.index}"}})
    downloads(view, run, key, pattern[:, len(pins):], rows, cols, weighting is not None)


def whole_csv(key: RunKey, head: Head) -> str:
    """One head's whole pattern as CSV, built when the button is pressed (from the key, so the
    button does not hold the run)."""
    run = server.current().results.get(key)
    if run is None:
        return "The prompt's patterns are no longer held by the server; open the view again.\n"
    return pattern_csv(run.pattern(head.layer, head.index), run.tokens)


def downloads(view: ExplorerView, run: AttentionRun, key: RunKey, window: np.ndarray,
              rows: range, cols: range, weighted: bool) -> None:
    """The shown window as CSV at once; the whole pattern too when it is small enough."""
    head, tokens = view.head, run.tokens
    kind = "value-weighted " if weighted else ""
    c = st.columns(2)
    c[0].download_button(f"Download the {kind}window shown (CSV)",
                         pattern_csv(window, tokens, rows, cols),
                         file_name=f"pattern_L{head.layer}_H{head.index}_"
                                   f"q{rows.start}-{rows.stop - 1}_k{cols.start}-{cols.stop - 1}"
                                   ".csv", mime="text/csv", key=Explorer.CSV)
    if run.n_tokens <= WHOLE_CSV_TOKENS and run.n_tokens > WINDOW:
        c[1].download_button(
            "Download this head's whole pattern (CSV)", lambda: whole_csv(key, head),
            file_name=f"pattern_L{head.layer}_H{head.index}.csv", mime="text/csv")
    elif run.n_tokens > WHOLE_CSV_TOKENS:
        c[1].caption(f"The whole pattern is {run.n_tokens:,}² cells: download windows instead "
                     "(move the window with the overview).")
