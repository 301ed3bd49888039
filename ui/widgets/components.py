"""Clickable views built on Streamlit custom components v2 (inline HTML + JS, no build step).

The HTML they show is built and escaped in ``viz/``, or is text the JavaScript here sets as
plain text (``textContent``, ``title``); the JavaScript wires clicks to trigger values that
Python reads back.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence

import numpy as np
import streamlit as st

from viz.token_view import VERBS, Direction

_GRID_CSS = """
.gridbox { position: relative; max-height: 560px; overflow-y: auto; border: 1px solid #e3e8ef;
           border-radius: 4px; }
.grid { display: grid; gap: 2px; align-items: center; font: 11px var(--st-font, sans-serif);
        padding: 2px; }
.grid .lab { color: var(--st-text-color, #333); text-align: center; opacity: 0.7; }
.grid .lab.top { position: sticky; top: 0; background: var(--st-background-color, #fff);
                 z-index: 1; }
.grid button { padding: 0; border: 2px solid transparent; background: none; cursor: pointer;
               line-height: 0; border-radius: 3px; }
.grid button:hover { border-color: #9ecae1; }
.grid button.sel { border-color: #e4572e; }
.grid img { width: 100%; image-rendering: pixelated; }
.grid button.marked { position: relative; }
.grid .badge { position: absolute; top: 2px; left: 2px; padding: 0 2px; border-radius: 2px;
               font: bold 9px/1.3 var(--st-code-font, monospace); color: #b03a2e;
               background: rgba(255, 255, 255, 0.85); pointer-events: none; }
.grid .fill { aspect-ratio: 1; display: flex; align-items: center; justify-content: center;
              font: 10px/1 var(--st-code-font, monospace); border-radius: 2px; }
"""

_GRID_JS = """
export default function(component) {
  const { data, parentElement, setTriggerValue } = component;
  let box = parentElement.querySelector('.gridbox');
  if (!box) { box = document.createElement('div'); box.className = 'gridbox';
              parentElement.appendChild(box); }
  let root = box.querySelector('.grid');
  if (!root) { root = document.createElement('div'); root.className = 'grid';
               box.appendChild(root); }
  root.dataset.kind = data.kind || 'pictures';
  if (data.cells) {  // null: the browser already holds these pictures, only the choice moved
    root.style.gridTemplateColumns = `2em repeat(${data.n_heads}, minmax(0, ${data.cell}px))`;
    root.replaceChildren();
    const label = (text, top) => { const d = document.createElement('div');
                                   d.className = top ? 'lab top' : 'lab';
                                   d.textContent = text; root.appendChild(d); };
    label('L\\\\H', true);
    for (let h = 0; h < data.n_heads; h++) label(String(h), true);
    data.cells.forEach((cell, i) => {
      if (i % data.n_heads === 0) label(String(Math.floor(i / data.n_heads)));
      const b = document.createElement('button');
      b.title = cell.title || ('head ' + cell.id); b.dataset.head = cell.id;
      b.setAttribute('aria-label', 'open head ' + cell.id);
      if (cell.src) {
        const img = document.createElement('img'); img.src = cell.src; img.alt = 'head ' + cell.id;
        b.appendChild(img);
        if (cell.badge) {  // what this prompt's scores mark the head as (letters, escaped)
          const mark = document.createElement('span'); mark.className = 'badge';
          mark.textContent = cell.badge; b.classList.add('marked'); b.appendChild(mark);
        }
      } else {  // a number on its colour (the divergence grid)
        const d = document.createElement('div'); d.className = 'fill';
        d.style.background = cell.fill; d.style.color = cell.ink; d.textContent = cell.text;
        b.appendChild(d);
      }
      b.onclick = () => {
        root.querySelectorAll('button.sel').forEach((el) => el.classList.remove('sel'));
        b.classList.add('sel');
        root.dataset.clicked = cell.id;
        setTriggerValue('clicked', cell.id);
      };
      root.appendChild(b);
    });
  }
  if (!data.cells && !root.querySelector('button')) {
    setTriggerValue('missing', true);  // drawn afresh (the page moved it): ask for the pictures
    return;
  }
  const shown = root.querySelector('button.sel');
  if (!data.cells && shown && shown.dataset.head === data.selected) {
    delete root.dataset.clicked;
    return;  // the head outlined already: nothing to restyle, no layout to read
  }
  if (shown) shown.classList.remove('sel');
  const chosen = root.querySelector(`button[data-head="${CSS.escape(data.selected)}"]`);
  if (chosen) chosen.classList.add('sel');
  // A head clicked here is on screen already: read the layout only for a choice made elsewhere.
  const clicked = root.dataset.clicked === data.selected;
  delete root.dataset.clicked;
  if (chosen && data.scroll && !clicked) {
    const at = chosen.offsetTop;
    if (at < box.scrollTop || at > box.scrollTop + box.clientHeight - 40)
      box.scrollTop = Math.max(0, at - box.clientHeight / 2);
  }
}
"""

_TOKENS_CSS = """
.toks { font: 15px/2.1 var(--st-code-font, monospace); max-height: 320px; overflow-y: auto; }
/* A token never breaks across lines: lines break only between tokens. */
.toks .tok { display: inline-block; white-space: pre; line-height: 1.5; padding: 2px 1px;
             margin: 2px 1px; border-radius: 3px; cursor: pointer; border: 1px solid #ddd; }
.toks .tok.sel { outline: 2px solid #e4572e; }
.toks .tok.span { outline: 2px solid #e4572e; outline-offset: -1px; }
.toks .tok.drag { box-shadow: inset 0 -4px #e4572e; }
"""

_TOKENS_JS = """
export default function(component) {
  const { data, parentElement, setTriggerValue } = component;
  let root = parentElement.querySelector('.toks');
  if (!root) { root = document.createElement('div'); root.className = 'toks';
               parentElement.appendChild(root); }
  let toks = root.querySelectorAll('.tok');
  let same = true;
  if (data.shaded) {
    // Tokens (plain text) and their weights: the spans are built once per prompt and only
    // restyled after that; colour = (w / top) ** 0.6 of the heatmap's dark blue, as in
    // viz.token_view.shade.
    const s = data.shaded, raw = atob(s.weights), buf = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) buf[i] = raw.charCodeAt(i);
    const w = new Float32Array(buf.buffer);
    same = toks.length === s.tokens.length && toks.length > 0;
    for (let i = 0; same && i < toks.length; i++) same = toks[i].textContent === s.tokens[i];
    if (!same) {
      const frag = document.createDocumentFragment();
      s.tokens.forEach((text, i) => {
        const el = document.createElement('span'); el.className = 'tok';
        el.dataset.pos = String(i); el.textContent = text; frag.appendChild(el);
      });
      root.replaceChildren(frag);
      toks = root.querySelectorAll('.tok');
    }
    let top = 0;
    for (const v of w) if (v > top) top = v;  // NaN (masked) never wins
    if (!(top > 0)) top = 1;
    toks.forEach((el, i) => {
      const v = w[i], seen = !Number.isNaN(v);
      let style = 'opacity:0.45;', tip = `(${i}) ${s.tokens[i]}: masked`;
      if (seen) {
        const alpha = Math.pow(Math.min(Math.max(v / top, 0), 1), 0.6);
        style = `background:rgba(8, 81, 156, ${alpha.toFixed(3)});` +
                (v / top > 0.5 ? 'color:white;' : '');
        tip = `(${i}) ${s.tokens[i]}: ${s.verb} ${v.toFixed(3)}`;
      }
      if (el.getAttribute('style') !== style) el.setAttribute('style', style);
      if (el.title !== tip) el.title = tip;
      el.classList.toggle('sel', i === s.selected);
    });
  } else {
    // Built and escaped by viz (the generated tokens). The same tokens again: only their
    // colours, tooltips and outlines change, so the spans are kept and restyled; the strip is
    // laid out again only when its tokens change.
    const tpl = document.createElement('template');
    tpl.innerHTML = data.html;
    const fresh = tpl.content.children;
    same = toks.length === fresh.length && toks.length > 0;
    for (let i = 0; same && i < toks.length; i++) {
      same = toks[i].textContent === fresh[i].textContent;
    }
    if (same) {
      for (let i = 0; i < toks.length; i++) {
        const a = toks[i], b = fresh[i];
        for (const name of ['class', 'style', 'title']) {
          const v = b.getAttribute(name);
          if (a.getAttribute(name) !== v) a.setAttribute(name, v);
        }
      }
    } else {
      root.replaceChildren(tpl.content);
      toks = root.querySelectorAll('.tok');
    }
  }
  const mark = (cls, a, b) => toks.forEach((el) => {
    const p = Number(el.dataset.pos); el.classList.toggle(cls, p >= a && p < b); });
  if (data.span) mark('span', data.span[0], data.span[1]);
  const posOf = (ev) => { const el = ev.target.closest('.tok');
                          return el ? Number(el.dataset.pos) : null; };
  const sendSpan = (a, b) => setTriggerValue(
    'span', {start: Math.min(a, b), stop: Math.max(a, b) + 1, at: Date.now()});
  // A drag over several tokens, or a shift-click, selects a span; a plain click one token.
  let start = null, dragged = false, swallow = false;
  root.onmousedown = (ev) => { const p = posOf(ev); if (p === null) return;
                               ev.preventDefault();  // no text selection while choosing tokens
                               if (!ev.shiftKey) { start = p; dragged = false; } };
  root.onmousemove = (ev) => { if (start === null) return; const p = posOf(ev);
    if (p === null || (p === start && !dragged)) return;
    dragged = true; mark('drag', Math.min(start, p), Math.max(start, p) + 1); };
  root.onmouseup = (ev) => { const p = posOf(ev), from = start, moved = dragged;
    start = null; dragged = false; mark('drag', 0, 0);
    if (!moved || from === null || p === null || p === from) return;
    swallow = true; setTimeout(() => { swallow = false; }, 0);  // the click this mouseup makes
    sendSpan(from, p); };
  root.onmouseleave = () => { start = null; dragged = false; mark('drag', 0, 0); };
  root.onclick = (ev) => {  // one listener for every token, however long the prompt
    const p = posOf(ev);
    if (p === null || swallow) return;
    if (ev.shiftKey && data.anchor !== null && data.anchor !== undefined) sendSpan(data.anchor, p);
    else { root.dataset.clicked = String(p); setTriggerValue('clicked', p); }
  };
  const chosen = root.querySelector('.tok.sel');
  const moved = !same || root.dataset.shown !== (chosen ? chosen.dataset.pos : '');
  root.dataset.shown = chosen ? chosen.dataset.pos : '';
  const clicked = chosen && root.dataset.clicked === chosen.dataset.pos;
  delete root.dataset.clicked;
  if (chosen && moved && !clicked) {
    const top = chosen.offsetTop - root.offsetTop;
    if (top < root.scrollTop || top > root.scrollTop + root.clientHeight - 30)
      root.scrollTop = Math.max(0, top - root.clientHeight / 2);
  }
}
"""

_OVERVIEW_CSS = """
.ov { position: relative; display: inline-block; cursor: crosshair; user-select: none;
      border: 1px solid #ccd5e0; line-height: 0; }
.ov img { image-rendering: pixelated; display: block; }
.ov .win { position: absolute; border: 2px solid #e4572e; pointer-events: none; }
.ov .drag { position: absolute; border: 1px dashed #333; background: rgba(228,87,46,0.12);
            pointer-events: none; display: none; }
.ovcap { font: 12px var(--st-font, sans-serif); opacity: 0.75; margin-top: 4px; }
"""

_OVERVIEW_JS = """
export default function(component) {
  const { data, parentElement, setTriggerValue } = component;
  let root = parentElement.querySelector('.ov');
  if (!root) {
    root = document.createElement('div'); root.className = 'ov';
    root.innerHTML = '<img alt="whole pattern"><div class="win"></div><div class="drag"></div>';
    parentElement.appendChild(root);
    const cap = document.createElement('div'); cap.className = 'ovcap';
    parentElement.appendChild(cap);
  }
  const img = root.querySelector('img'), win = root.querySelector('.win');
  const drag = root.querySelector('.drag');
  parentElement.querySelector('.ovcap').textContent = data.caption;
  // Never wider than the column it sits in: a narrow column shrinks the picture, not the layout.
  const host = parentElement.host || parentElement;  // a shadow root has no width of its own
  // The column's width is read once (a layout read), again only when the window is resized.
  if (!root.dataset.room || root.dataset.width !== String(window.innerWidth)) {
    const width = host.clientWidth;
    root.dataset.room = width ? String(width - 2) : '';  // not laid out yet: measure next time
    root.dataset.width = String(window.innerWidth);
  }
  const room = root.dataset.room ? Number(root.dataset.room) : data.size;
  const size = Math.max(96, Math.min(data.size, room));
  img.src = data.src; img.style.width = size + 'px'; img.style.height = size + 'px';
  const scale = size / data.n;
  const box = (el, r0, r1, c0, c1) => {
    el.style.top = (r0 * scale) + 'px'; el.style.height = Math.max(2, (r1 - r0) * scale) + 'px';
    el.style.left = (c0 * scale) + 'px'; el.style.width = Math.max(2, (c1 - c0) * scale) + 'px';
  };
  box(win, data.rows[0], data.rows[1], data.cols[0], data.cols[1]);
  const at = (ev) => { const r = img.getBoundingClientRect();
    return [Math.min(data.n - 1, Math.max(0, Math.floor((ev.clientY - r.top) / scale))),
            Math.min(data.n - 1, Math.max(0, Math.floor((ev.clientX - r.left) / scale)))]; };
  let start = null;
  root.onmousedown = (ev) => { start = at(ev); drag.style.display = 'block';
                               box(drag, start[0], start[0] + 1, start[1], start[1] + 1);
                               ev.preventDefault(); };
  root.onmousemove = (ev) => { if (!start) return; const p = at(ev);
    box(drag, Math.min(start[0], p[0]), Math.max(start[0], p[0]) + 1,
        Math.min(start[1], p[1]), Math.max(start[1], p[1]) + 1); };
  const finish = (ev) => { if (!start) return; const p = at(ev); drag.style.display = 'none';
    const q0 = Math.min(start[0], p[0]), q1 = Math.max(start[0], p[0]);
    const k0 = Math.min(start[1], p[1]), k1 = Math.max(start[1], p[1]);
    start = null;
    setTriggerValue('picked', {q0: q0, q1: q1, k0: k0, k1: k1, at: Date.now()}); };
  root.onmouseup = finish; root.onmouseleave = (ev) => { if (start) finish(ev); };
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
_overview = st.components.v2.component("atlas_overview", css=_OVERVIEW_CSS, js=_OVERVIEW_JS)


def clicked_value(key: str, name: str = "clicked"):
    """The trigger value ``name`` a component mounted under ``key`` sent, if any."""
    value = st.session_state.get(key)
    if value is None:
        return None
    return value.get(name) if hasattr(value, "get") else getattr(value, name, None)


def head_grid(
    cells: list[dict] | None,
    n_heads: int,
    selected: str,
    key: str,
    on_click: Callable[[], None],
    cell_px: int = 72,
    kind: str = "pictures",
    on_missing: Callable[[], None] | None = None,
) -> None:
    """Grid of head thumbnails in a scrolling box; ``cells`` hold ``id`` (``L.H``) and ``src``
    (a data URI), or None when the browser already shows these pictures (only the selection is
    sent then). A cell without ``src`` is drawn as its ``text`` on a ``fill`` colour in ``ink``
    (the divergence grid), with ``title`` as its tooltip; a picture's ``badge`` (a few letters)
    is drawn in its corner. ``kind`` names the grid in the page
    (``data-kind``). The selected head is outlined at once in the browser and scrolled into
    view. A grid drawn afresh without pictures calls ``on_missing`` (then reruns), which must
    make the next run send them."""
    _head_grid(
        data={
            "cells": cells,
            "n_heads": n_heads,
            "selected": selected,
            "cell": cell_px,
            "scroll": True,
            "kind": kind,
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
    there, a drag picks the query and key ranges (read back with ``clicked_value(key, "picked")``:
    ``{q0, q1, k0, k1}`` in positions)."""
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
    tokens: Sequence[str], weights: np.ndarray, selected: int | None, direction: Direction
) -> dict:
    """What :func:`token_strip` draws for tokens shaded by one weight each (NaN: masked), the
    way :func:`viz.token_view.token_spans` writes them: the tokens go as plain text, the
    weights as float32 bytes, so a new head or query only restyles the spans already there."""
    return {
        "tokens": list(tokens),
        "weights": base64.b64encode(np.asarray(weights, dtype="<f4").tobytes()).decode("ascii"),
        "selected": selected,
        "verb": VERBS[direction],
    }


def token_strip(
    content: str | dict,
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
    exclusive; read back with ``clicked_value(key, "span")``). ``span`` outlines a selection.
    """
    drawn = {"html": content} if isinstance(content, str) else {"shaded": content}
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
