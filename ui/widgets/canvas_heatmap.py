"""The explorer's detail heatmap, drawn on a canvas in the browser.

A Streamlit custom component (v2, its code in ``frontend/heatmap.js``): the server sends the
window's colour indices and weights as bytes (:func:`viz.heatmap.canvas_data`) and the browser
paints them, with the token labels, the colour bar, the outlines and a hover readout. The
component keeps its place on the page from one head to the next (its key names it), so a click
only repaints: no chart library is torn down and mounted again. Labels are drawn as canvas text
and the readout is set through ``textContent``: nothing the prompt holds is ever parsed as
markup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from ui.widgets.components import mounted
from ui.widgets.frontend_code import source

_JS = source("heatmap.js")
_heatmap = st.components.v2.component("atlas_heatmap", css=source("heatmap.css"), js=_JS)


def canvas_heatmap(
    data: dict[str, Any],
    key: str,
    file_name: str,
    label: str,
    on_click: Callable[[], None] | None = None,
) -> None:
    """Draw ``data`` (from :func:`viz.heatmap.canvas_data`) under ``key``; "Save as PNG"
    writes ``file_name``.png at twice the screen's resolution; ``label`` names the picture for
    screen readers.

    With ``on_click``, a click on a cell calls it (then reruns); the cell is read back with
    ``clicked_value(key)`` from :mod:`ui.widgets.components`: ``{query, key}``, its row and
    column in the window drawn. Without it, a click does nothing (no rerun).
    """
    mounted(key, "heatmap")
    _heatmap(
        data={**data, "file_name": file_name, "label": label, "clickable": on_click is not None},
        key=key,
        on_clicked_change=on_click or (lambda: None),
    )
