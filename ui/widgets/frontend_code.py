"""The browser's side of the components: JavaScript and CSS files in ``frontend/``.

Each component's code is a pair of files named for it (``head_grid.js`` and ``head_grid.css``),
linted by eslint (``make lint``). Streamlit serves component files by path only for an installed
package that declares an ``asset_dir``; the app runs from its folder and is never installed, so
the files are read once at import and handed to ``st.components.v2.component`` as inline code,
which the frontend loads as an ES module.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.components.v2.types import ComponentRenderer

FRONTEND = Path(__file__).parent / "frontend"
PAGE_ICON = FRONTEND / "page_icon.svg"  # the browser tab's icon, served by the app itself


def source(name: str) -> str:
    """The text of ``frontend/<name>`` (a ``.js`` or ``.css`` file)."""
    return (FRONTEND / name).read_text(encoding="utf-8")


def component(name: str, stem: str, *, css: bool = True) -> ComponentRenderer:
    """Register the component ``name`` with ``frontend/<stem>.js`` as its code and, when
    ``css``, ``frontend/<stem>.css`` as its style; returns the callable that mounts it."""
    return st.components.v2.component(
        name, js=source(f"{stem}.js"), css=source(f"{stem}.css") if css else None
    )
