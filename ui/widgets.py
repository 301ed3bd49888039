"""Clickable views built on Streamlit custom components v2 (inline HTML + JS, no build step).

The HTML they show is built and escaped in ``viz/``; the JavaScript here only wires clicks to
trigger values that Python reads back.
"""

from __future__ import annotations

from typing import Callable

import streamlit as st

_GRID_CSS = """
.grid { display: grid; gap: 3px; align-items: center; font: 12px var(--st-font, sans-serif); }
.grid .lab { color: var(--st-text-color, #333); text-align: center; opacity: 0.7; }
.grid button { padding: 0; border: 2px solid transparent; background: none; cursor: pointer;
               line-height: 0; border-radius: 3px; }
.grid button:hover { border-color: #9ecae1; }
.grid button.sel { border-color: #e4572e; }
.grid img { width: 100%; image-rendering: pixelated; }
"""

_GRID_JS = """
export default function(component) {
  const { data, parentElement, setTriggerValue } = component;
  let root = parentElement.querySelector('.grid');
  if (!root) { root = document.createElement('div'); root.className = 'grid';
               parentElement.appendChild(root); }
  root.style.gridTemplateColumns = `2em repeat(${data.n_heads}, minmax(0, 72px))`;
  root.replaceChildren();
  const label = (text) => { const d = document.createElement('div'); d.className = 'lab';
                            d.textContent = text; root.appendChild(d); };
  label('L\\\\H');
  for (let h = 0; h < data.n_heads; h++) label(String(h));
  data.cells.forEach((cell, i) => {
    if (i % data.n_heads === 0) label(String(Math.floor(i / data.n_heads)));
    const b = document.createElement('button');
    b.className = cell.id === data.selected ? 'sel' : '';
    b.title = 'head ' + cell.id; b.dataset.head = cell.id;
    b.setAttribute('aria-label', 'open head ' + cell.id);
    const img = document.createElement('img'); img.src = cell.src; img.alt = 'head ' + cell.id;
    b.appendChild(img);
    b.onclick = () => setTriggerValue('clicked', cell.id);
    root.appendChild(b);
  });
}
"""

_TOKENS_CSS = """
.toks { font: 15px/2.1 var(--st-code-font, monospace); white-space: pre-wrap;
        word-break: break-word; }
.toks .tok { padding: 2px 1px; margin: 0 1px; border-radius: 3px; cursor: pointer;
             border: 1px solid #ddd; }
.toks .tok.sel { outline: 2px solid #e4572e; }
"""

_TOKENS_JS = """
export default function(component) {
  const { data, parentElement, setTriggerValue } = component;
  let root = parentElement.querySelector('.toks');
  if (!root) { root = document.createElement('div'); root.className = 'toks';
               parentElement.appendChild(root); }
  root.innerHTML = data.html;  // built and escaped by viz.token_view
  root.querySelectorAll('.tok').forEach((el) => {
    el.onclick = () => setTriggerValue('clicked', Number(el.dataset.pos));
  });
}
"""

_URL_JS = """
export default function(component) {
  const wanted = new URLSearchParams(component.data.query).toString();
  window.__atlasWantedQuery = wanted;
  const apply = () => {
    if (window.__atlasWantedQuery !== wanted) return;  // a newer view has taken over
    const url = new URL(window.location.href);
    if (url.searchParams.toString() !== wanted) {
      url.search = wanted;
      window.history.replaceState(window.history.state, '', url);
    }
  };
  apply();
  // Streamlit restores the query string it started the rerun with once the run ends.
  [300, 1000, 2500].forEach((ms) => setTimeout(apply, ms));
}
"""

_head_grid = st.components.v2.component("atlas_head_grid", css=_GRID_CSS, js=_GRID_JS)
_token_strip = st.components.v2.component("atlas_token_strip", css=_TOKENS_CSS, js=_TOKENS_JS)
_url_sync = st.components.v2.component("atlas_url_sync", js=_URL_JS)


def clicked_value(key: str):
    """The trigger value a component mounted under ``key`` sent on this rerun, if any."""
    value = st.session_state.get(key)
    if value is None:
        return None
    return value.get("clicked") if hasattr(value, "get") else getattr(value, "clicked", None)


def head_grid(cells: list[dict], n_heads: int, selected: str, key: str,
              on_click: Callable[[], None]) -> None:
    """Grid of head thumbnails; ``cells`` hold ``id`` (``L.H``) and ``src`` (a data URI)."""
    _head_grid(data={"cells": cells, "n_heads": n_heads, "selected": selected}, key=key,
               on_clicked_change=on_click)


def token_strip(spans_html: str, key: str, on_click: Callable[[], None]) -> None:
    """The prompt as clickable tokens; ``spans_html`` must already be escaped."""
    _token_strip(data={"html": spans_html}, key=key, on_clicked_change=on_click)


def sync_url(query: dict[str, str], key: str = "atlas_url") -> None:
    """Show ``query`` in the browser's address bar (replaceState), so the view can be shared.

    Done in the page rather than through ``st.query_params``: at the end of a rerun the frontend
    puts back the query string the rerun started with, so those writes show one rerun late.
    """
    _url_sync(data={"query": query}, key=key)
