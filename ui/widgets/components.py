"""Clickable views built on Streamlit custom components v2 (their code in ``frontend/``).

The HTML they show is built and escaped in ``viz/``, or is text their JavaScript sets as plain
text (``textContent``, ``title``); the JavaScript wires clicks to trigger values that Python
reads back.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import streamlit as st

from models.capture.spans import Direction
from ui.widgets.component_messages import Message, checked
from ui.widgets.frontend_code import component
from viz.token_view import VERBS

_head_grid = component("atlas_head_grid", "head_grid")
_token_strip = component("atlas_token_strip", "token_strip")
_url_sync = component("atlas_url_sync", "url_sync", css=False)
_overview = component("atlas_overview", "overview")
_map_pictures = component("atlas_map_pictures", "map_pictures", css=False)
_mounted: dict[str, str] = {}  # widget key -> the component mounted under it


def mounted(key: str, component_name: str) -> None:
    """Note that ``component_name`` is drawn under ``key`` (what its messages are checked as)."""
    _mounted[key] = component_name


def clicked_value(key: str, name: str = "clicked") -> Message | None:
    """The trigger value ``name`` the component mounted under ``key`` sent, in the shape that
    component sends it (:mod:`ui.widgets.component_messages`); None if there is none, or if
    what arrived is not such a value."""
    value = st.session_state.get(key)
    if value is None:
        return None
    raw = value.get(name) if hasattr(value, "get") else getattr(value, name, None)
    return checked(_mounted.get(key), name, raw)


def clicked_head(key: str) -> str | None:
    """The head (``L.H``) clicked in the head grid mounted under ``key``, or None."""
    value = clicked_value(key)
    return value if isinstance(value, str) else None


def clicked_position(key: str) -> int | None:
    """The position clicked in the component mounted under ``key``, or None."""
    value = clicked_value(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def picked_positions(key: str, name: str) -> dict[str, int] | None:
    """The named positions (a span, a window, a cell) sent as ``name`` by the component mounted
    under ``key``, or None."""
    value = clicked_value(key, name)
    return value if isinstance(value, dict) else None


def head_grid(
    cells: list[dict[str, Any]] | None,
    n_heads: int,
    selected: str,
    key: str,
    on_click: Callable[[], None],
    cell_px: int = 72,
    kind: str = "pictures",
    on_missing: Callable[[], None] | None = None,
    layers: list[dict[str, str]] | None = None,
) -> None:
    """Grid of head thumbnails in a scrolling box; ``cells`` hold ``id`` (``L.H``) and ``src``
    (a data URI), or None when the browser already shows these pictures (only the selection is
    sent then). A cell without ``src`` is drawn as its ``text`` on a ``fill`` colour in ``ink``
    (the divergence grid), with ``title`` as its tooltip; a picture's ``badge`` (a few letters)
    is drawn in its corner; a cell with ``none`` (its tooltip) is an empty slot, for a layer
    with fewer heads than the widest. ``kind`` names the grid in the page
    (``data-kind``). The selected head is outlined at once in the browser and scrolled into
    view. A grid drawn afresh without pictures calls ``on_missing`` (then reruns), which must
    make the next run send them. ``layers`` gives each layer's row a ``mark`` under its number
    and a ``title`` (what the layer computes), for models whose layers differ."""
    mounted(key, "head_grid")
    _head_grid(
        data={
            "cells": cells,
            "n_heads": n_heads,
            "selected": selected,
            "cell": cell_px,
            "scroll": True,
            "kind": kind,
            "layers": layers,
        },
        key=key,
        on_clicked_change=on_click,
        on_missing_change=on_missing or (lambda: None),
    )


def overview(
    src: str,
    n: int,
    rows: tuple[int, int],
    cols: tuple[int, int],
    key: str,
    on_pick: Callable[[], None],
    size: int = 200,
    caption: str = "",
) -> None:
    """One head's whole pattern with the detail window outlined; a click centres the window
    there, a drag picks the query and key ranges (read back with
    ``picked_positions(key, "picked")``: ``{q0, q1, k0, k1}`` in positions)."""
    mounted(key, "overview")
    _overview(
        data={
            "src": src,
            "n": n,
            "rows": list(rows),
            "cols": list(cols),
            "size": size,
            "caption": caption,
        },
        key=key,
        on_picked_change=on_pick,
    )


def shaded(
    tokens: Sequence[str],
    weights: np.ndarray,
    selected: int | None,
    direction: Direction,
    signed: bool = False,
    sink: float | None = None,
    verb: str | None = None,
) -> dict[str, Any]:
    """What :func:`token_strip` draws for tokens shaded by one weight each (NaN: masked), the
    way :func:`viz.token_view.token_spans` writes them: the tokens go as plain text, the
    weights as float32 bytes, so a new head or query only restyles the spans already there.
    ``focus`` is where the strip scrolls to: the strongest weight (see :func:`strongest`);
    ``signed``: a linear layer's signed mixing entries, shaded red and blue; ``sink``: the
    weight on a learned sink (drawn as a "sink" item before the tokens, shaded by the same
    rule), or None; ``verb``: what each tooltip calls the number (by default the attention in
    ``direction``)."""
    return {
        "sink": None if sink is None else float(sink),
        "tokens": list(tokens),
        "weights": base64.b64encode(np.asarray(weights, dtype="<f4").tobytes()).decode("ascii"),
        "selected": selected,
        "verb": verb or VERBS[direction],
        "focus": strongest(weights),
        "signed": signed,
    }


def strongest(weights: np.ndarray) -> int | None:
    """The position of the largest finite weight, the first position left out (a sink there
    would hide where the rest of the attention goes); None when no weight is above zero."""
    rest = np.asarray(weights, dtype=np.float64)[1:]
    rest = np.where(np.isfinite(rest), rest, -np.inf)
    if rest.size == 0 or not rest.max() > 0:
        return None
    return int(rest.argmax()) + 1


def token_strip(
    content: str | dict[str, Any],
    key: str,
    on_click: Callable[[], None],
    on_span: Callable[[], None] | None = None,
    span: tuple[int, int] | None = None,
    anchor: int | None = None,
) -> None:
    """Tokens as clickable spans: ``content`` is ready HTML (already escaped), or tokens and
    their weights from :func:`shaded`.

    A click sends ``clicked`` (a position); a drag across several positions, or a shift-click
    (from ``anchor``, the selected position), sends ``span`` (``{start, stop}``, stop
    exclusive; read back with ``picked_positions(key, "span")``). ``span`` outlines a selection.
    """
    drawn = {"html": content} if isinstance(content, str) else {"shaded": content}
    mounted(key, "token_strip")
    _token_strip(
        data={**drawn, "span": list(span) if span else None, "anchor": anchor},
        key=key,
        on_clicked_change=on_click,
        on_span_change=on_span or (lambda: None),
    )


def sync_url(query: dict[str, str], key: str = "atlas_url") -> None:
    """Show ``query`` in the browser's address bar (replaceState), so the view can be shared.

    Done in the page rather than through ``st.query_params``: at the end of a rerun the frontend
    puts back the query string the rerun started with, so those writes show one rerun late.
    """
    _url_sync(data={"query": query}, key=key)


def map_pictures(
    pictures: dict[str, str] | None,
    map_id: str,
    chart: str,
    caption: str,
    key: str,
    on_missing: Callable[[], None],
) -> None:
    """A picture per point of the plotly chart drawn under the key ``chart``, shown beside the
    pointer while it rests on the point (``customdata[0]`` names the point, ``L.H``), with
    ``caption`` under it. ``pictures`` (point -> PNG data URI) may be None when the browser
    holds this map's (``map_id``) already; a component drawn afresh without them calls
    ``on_missing`` (then reruns), which must make the next run send them."""
    mounted(key, "map_pictures")
    _map_pictures(
        data={"pictures": pictures, "id": map_id, "chart": chart, "caption": caption},
        key=key,
        on_missing_change=on_missing,
    )
