""" "Download this view as HTML": one self-contained file of what the explorer shows.

The file (built by :func:`viz.html_export.view_html`) holds the grid's pictures, the chosen
head's heatmap (the same plotly figure as on the page: the detail window, or A − B in compare
mode), the token strip and a caption. Its size is stated on the button before anything is
built; the file itself is built only when the button is pressed, from the run's key, so the
button never holds a run.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from urllib.parse import urlencode

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from models.capture.words import WORD_RULE
from ui import session
from ui.keys import Explorer
from ui.runtime import server
from ui.runtime.job_keys import CompareKey, RolloutKey, RunKey
from ui.sections import explorer_compare_detail as compare_detail
from ui.sections import explorer_detail as detail
from ui.sections import explorer_results as results
from ui.sections import explorer_strip as strip
from ui.sections.explorer_difference import Pair
from ui.state import explorer as state
from ui.state.explorer import ExplorerView, unit_of
from viz.heatmap import HeatmapData, heatmap_figure
from viz.html_export import Caption, ExportTooLarge, Strip, export_size, heatmap_extent, view_html

SCALES = {"sqrt": "square root", "linear": "linear", "log": "log"}
RANGES = {"unit": "0 to 1", "view": "the largest weight shown"}
PROMPT_B_CHARS = 1_200


@dataclass(frozen=True)
class ExportRequest:
    """Everything the file is built from (small values: keys, never runs)."""

    view: ExplorerView
    key: RunKey
    weighted: bool
    link: str


def settings(request: ExportRequest) -> dict[str, str]:
    view, out = request.view, {}
    if view.mode == "compare":
        b = view.prompt_b
        out["prompt B"] = (
            b
            if len(b) <= PROMPT_B_CHARS
            else (f"{b[:PROMPT_B_CHARS]}… ({len(b):,} characters in all)")
        )
        out["heatmap"] = (
            "A − B of this head on aligned positions (red: A attends more, blue: B does)"
        )
    out["units"] = f"words. {WORD_RULE}" if view.words else "tokens"
    out["colour scale"] = f"{SCALES[view.scale]}, range {RANGES[view.colour_range]}"
    out["value-weighted"] = "yes" if request.weighted and view.mode == "single" else "no"
    start, stop = state.selection(view)
    what = f"tokens {start}–{stop - 1}" if stop - start > 1 else f"token {start}"
    colour = (
        "attention rollout"
        if view.rollout and view.mode == "single"
        else strip.SCOPES[view.scope if view.mode == "single" else "head"].lower()
    )
    out["token strip"] = f"{colour}, {strip.DIRECTIONS[view.direction].lower()}, {what}"
    return out


def caption(request: ExportRequest, model: str) -> Caption:
    view = request.view
    return Caption(
        model=model,
        prompt=request.key.prompt,
        layer=view.head.layer,
        head=view.head.index,
        settings=settings(request),
        link=request.link,
    )


def figure_and_strip(request: ExportRequest) -> tuple[go.Figure, Strip] | None:
    """The heatmap and the strip as the page shows them, rebuilt from the stores."""
    view, key = request.view, request.key
    run = server.current().results.get(key)
    if run is None:
        return None
    words = results.words_of(key) if view.words else None
    names = list(words.labels) if words is not None else list(run.tokens)
    selected = unit_of(view.query, words)
    if view.mode == "compare":
        key_b = replace(key, prompt=view.prompt_b)
        run_b = server.current().results.get(key_b)
        comparison = server.current().pool.finished(CompareKey(key, key_b, view.words))
        if run_b is None or comparison is None:
            return None
        words_b = results.words_of(key_b) if view.words else None
        pair = Pair(run, run_b, key, comparison.alignment, words, words_b)
        found = compare_detail.figures(view, pair)
        if found is None:
            return None
        weights = strip.attention_weights(replace(view, scope="head", span=None), run, None, words)
        return heatmap_figure(found.difference), Strip(names, weights, selected, view.direction)
    weighting = results.weighting(key) if request.weighted else None
    shown = detail.detail_heatmap(view, run, key, weighting, words)
    rolled = None
    if view.rollout:
        rolled = server.current().results.get(
            RolloutKey(key, state.selection(view), view.direction, words is not None)
        )
    rolled_out = rolled is not None
    if rolled is None and view.span is not None:  # what the strip was coloured with (kept)
        rolled = server.current().results.get(
            strip.span_key(view, key, weighting is not None, words is not None)
        )
        if rolled is None:
            return None
    weights = rolled if rolled is not None else strip.attention_weights(view, run, weighting, words)
    mixing = strip.signed(view, run, rolled_out)
    drawn = Strip(names, np.asarray(weights), selected, view.direction, mixing)
    return heatmap_figure(shown.heatmap), drawn


def build(request: ExportRequest) -> str:
    """The file (called when the button is pressed)."""
    run = server.current().results.get(request.key)
    found = figure_and_strip(request)
    if run is None or found is None:
        return (
            "<!DOCTYPE html><p>The prompt's patterns are no longer held by the server; "
            "open the view again and download once more.</p>"
        )
    grid = results.grid_pictures(request.key, request.weighted, run.grid_heads)
    return view_html(
        caption(request, run.facts.name), grid, found[0], found[1], marks=marks(request.key)
    )


def marks(key: RunKey) -> dict[tuple[int, int], tuple[str, str]]:
    """The letters the grid shows on each marked head (I, P, S) and what they mean."""
    return {
        (head.layer, head.index): (
            letters,
            ", ".join(results.MARK_WORDS[letter] for letter in letters),
        )
        for head, letters in results.held_marks(key).items()
        if letters
    }


def absolute(query: dict[str, str]) -> str:
    """The view's link, absolute when the page's address is known."""
    base = str(getattr(st.context, "url", "") or "").split("?")[0]
    return f"{base}?{urlencode(query)}" if base.startswith("http") else "./?" + urlencode(query)


def button(
    view: ExplorerView,
    key: RunKey,
    heatmap: go.Figure | HeatmapData,
    names: list[str],
    weighted: bool,
    n_heads: int,
    model: str,
) -> None:
    """The download button, its size stated from what is on the page (``heatmap``: the
    detail heatmap's data, or the A − B figure in compare mode)."""
    request = ExportRequest(view, key, weighted, absolute(session.page_query(view, key.prompt)))
    grid = results.grid_pictures(key, weighted, n_heads)
    cells, labels = heatmap_extent(heatmap)
    size = export_size(grid, cells, labels, names, caption(request, model))
    file_name = f"attention_L{view.head.layer}_H{view.head.index}_{view.mode}.html"

    def data() -> str:
        try:
            return build(request)
        except ExportTooLarge as err:
            return f"<!DOCTYPE html><p>{html.escape(str(err))}</p>"

    st.download_button(
        f"Download this view as HTML ({size / 1e6:.1f} MB)",
        data,
        file_name=file_name,
        mime="text/html",
        key=Explorer.EXPORT,
        on_click="ignore",
        help="One self-contained file (the grid's pictures, this head's heatmap "
        "with plotly inside, the token strip and a caption) that opens in "
        "any browser offline and makes no network request.",
    )
