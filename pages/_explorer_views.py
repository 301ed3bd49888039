"""The explorer's interactive view: the head grid, the overview and detail heatmap, the tokens.

Everything here runs inside one fragment, so a click on a head, a token, the overview or an
option reruns only this view, not the page (the model and the run are not touched again).
The view (layer, head, token, windows) is kept in ``atlas_view`` as well as in the widgets'
own keys, so it survives a visit to another page.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

import app_state
from models.capture.run import AttentionRun
from models.capture.views import scoped_weights, strongest_key
from models.errors import UserError
from ui import caches, job_view, widgets
from ui.text import md
from viz.export import pattern_csv
from viz.heatmap import head_heatmap
from viz.token_view import legend_html, token_spans
from viz.view_state import ViewState, clamp

K_LAYER, K_HEAD, K_TOKEN = "explorer_layer", "explorer_head", "explorer_token"
K_GRID, K_TOKENS, K_OVERVIEW = "explorer_grid", "explorer_tokens", "explorer_overview"
K_SCOPE, K_DIR, K_ROW0, K_COL0 = "explorer_scope", "explorer_dir", "explorer_row0", "explorer_col0"
K_SCALE, K_NORM, K_SKIP0, K_PIN = ("explorer_scale", "explorer_norm", "explorer_skip0",
                                   "explorer_pin")
K_VIEW, K_VW, K_GRID_SHOWN = "atlas_view", "explorer_vw", "explorer_grid_shown"
WINDOW = 160
SCOPES = {"This head": "head", "Mean over the layer's heads": "layer", "Mean over all heads": "all"}
DIRECTIONS = {"What the token attends to": "from", "Which tokens attend to it": "to"}
SCALES = {"Square root": "sqrt", "Linear": "linear", "Log": "log"}


def remember() -> None:
    """Copy the widget choices into the page-independent view."""
    st.session_state[K_VIEW] = {key: st.session_state.get(key) for key in
                                (K_LAYER, K_HEAD, K_TOKEN, K_ROW0, K_COL0)}


def full_run() -> None:
    """A full page run redraws the grid from scratch: the pictures must be sent again."""
    st.session_state.pop(K_GRID_SHOWN, None)


def seed_view(run: AttentionRun) -> None:
    """Start from the shared link once, then from the remembered view; keep it in range.

    On a long prompt the first detail window shows the selected query's rows and the keys it
    attends to most, so an induction stripe or a distant copy is on screen from the start.
    """
    n_layers, n_heads, n_tokens = run.facts.n_layers, run.facts.n_heads, run.n_tokens
    link = app_state.link_state()
    kept = st.session_state.get(K_VIEW, {})
    pick = lambda key, default: st.session_state.get(key, kept.get(key, default))  # noqa: E731
    wanted = ViewState(layer=pick(K_LAYER, link.layer), head=pick(K_HEAD, link.head),
                       token=pick(K_TOKEN, link.token))
    if wanted.token is None:
        wanted = ViewState(layer=wanted.layer, head=wanted.head, token=n_tokens - 1)
    fixed, notes = clamp(wanted, n_layers, n_heads, n_tokens)
    if K_VIEW not in st.session_state:
        for note in notes + app_state.link_notes():
            st.info(md(note))
    st.session_state[K_LAYER], st.session_state[K_HEAD] = fixed.layer, fixed.head
    st.session_state[K_TOKEN] = fixed.token
    last = max(n_tokens - WINDOW, 0)
    if pick(K_ROW0, None) is None and n_tokens > WINDOW:
        st.session_state[K_ROW0] = min(max(fixed.token - WINDOW // 2, 0), last)
        strongest = strongest_key(run, fixed.layer, fixed.head, fixed.token, skip_first=True)
        st.session_state[K_COL0] = min(max(strongest - WINDOW // 2, 0), last)
    for key in (K_ROW0, K_COL0):
        st.session_state[key] = min(max(int(pick(key, 0) or 0), 0), last)
    remember()


def on_head_click() -> None:
    clicked = widgets.clicked_value(K_GRID)
    if clicked:
        layer, head = (int(part) for part in str(clicked).split("."))
        st.session_state[K_LAYER], st.session_state[K_HEAD] = layer, head
        remember()


def on_token_click() -> None:
    clicked = widgets.clicked_value(K_TOKENS)
    if clicked is not None:
        st.session_state[K_TOKEN] = int(clicked)
        follow_token(int(clicked))
        remember()


def follow_token(token: int) -> None:
    """Bring a newly chosen query row into the detail window (keys stay where they are)."""
    row0 = st.session_state.get(K_ROW0, 0)
    if not row0 <= token < row0 + WINDOW:
        st.session_state[K_ROW0] = max(0, token - WINDOW // 2)


def on_overview_pick(n_tokens: int) -> None:
    picked = widgets.clicked_value(K_OVERVIEW, "picked")
    if not picked:
        return
    last = max(n_tokens - WINDOW, 0)
    q0, q1, k0, k1 = (int(picked[name]) for name in ("q0", "q1", "k0", "k1"))
    centre = lambda lo, hi: min(max((lo + hi) // 2 - WINDOW // 2, 0), last)  # noqa: E731
    small = q1 - q0 < 4 and k1 - k0 < 4  # a click: centre the window there
    st.session_state[K_ROW0] = centre(q0, q1) if small or q1 - q0 > WINDOW else min(q0, last)
    st.session_state[K_COL0] = centre(k0, k1) if small or k1 - k0 > WINDOW else min(k0, last)
    remember()


def jump_to_strongest(run: AttentionRun) -> None:
    """Move the key window to where the selected query attends most (besides key 0)."""
    ss = st.session_state
    key = strongest_key(run, ss[K_LAYER], ss[K_HEAD], ss[K_TOKEN], skip_first=True)
    ss[K_COL0] = min(max(key - WINDOW // 2, 0), max(run.n_tokens - WINDOW, 0))
    follow_token(ss[K_TOKEN])
    remember()


def pinned_keys(run: AttentionRun, layer: int, head: int, first: int) -> list[int]:
    """Sink keys shown before the window: key 0 and this head's strongest sink, if outside it."""
    keys = {0, caches.sink_key(run.spec, run.prompt, layer, head)}
    return sorted(k for k in keys if not first <= k < first + WINDOW)


def read(run: AttentionRun, weighting, layer: int, head: int, rows: slice,
         cols: slice) -> np.ndarray:
    """A window of one head's pattern, value-weighted when ``weighting`` is given."""
    window = run.window(layer, head, rows, cols)
    return window if weighting is None else window * weighting.scale(layer, head, rows, cols)


def detail(run: AttentionRun, labels: list[str], weighting=None) -> None:
    """Overview picker, colour options and the detail heatmap of the selected head."""
    ss = st.session_state
    layer, head, token, n = ss[K_LAYER], ss[K_HEAD], ss[K_TOKEN], run.n_tokens
    spec, prompt = run.spec, run.prompt
    long = n > WINDOW
    row0, col0 = (ss[K_ROW0], ss[K_COL0]) if long else (0, 0)
    rows, cols = slice(row0, min(row0 + WINDOW, n)), list(range(col0, min(col0 + WINDOW, n)))
    left, right = st.columns([2, 3]) if long else (None, st.container())
    if long:
        with left:
            widgets.overview(caches.overview_png(spec, prompt, layer, head, True,
                                                 weighting is not None), n,
                             (rows.start, rows.stop), (cols[0], cols[-1] + 1), K_OVERVIEW,
                             lambda: on_overview_pick(n), size=caches.OVERVIEW,
                             caption=f"Whole pattern, {n:,} × {n:,}, max-pooled. Click to "
                                     "centre the detail window, drag to choose its rows and "
                                     "keys.")
    with right:
        c = st.columns(2)
        scale = c[0].selectbox("Colour scale", list(SCALES), key=K_SCALE,
                               help="Square root and log bring out small weights.")
        norm = c[1].selectbox("Colour range", ["0 to 1", "This view's largest weight"],
                              key=K_NORM)
        skip = st.checkbox("Leave the first token out of the colour range", key=K_SKIP0,
                           disabled=norm == "0 to 1",
                           help="Most heads park weight on the first token (a sink); leaving "
                                "it out lets the rest of the pattern use the whole range.")
        pin = long and st.checkbox("Always show the first token and this head's strongest sink",
                                   key=K_PIN, value=True)
        if long:
            if st.button("Jump to where this query attends most", key="explorer_jump"):
                jump_to_strongest(run)
                row0, col0 = ss[K_ROW0], ss[K_COL0]
                rows = slice(row0, min(row0 + WINDOW, n))
                cols = list(range(col0, min(col0 + WINDOW, n)))
            st.caption(f"Detail: queries {rows.start}–{rows.stop - 1}, keys {cols[0]}–{cols[-1]} "
                       f"of {n:,}.")
    pins = pinned_keys(run, layer, head, cols[0]) if pin else []
    shown_cols = pins + cols
    pattern = np.concatenate([read(run, weighting, layer, head, rows, slice(k, k + 1))
                              for k in pins]
                             + [read(run, weighting, layer, head, rows,
                                     slice(cols[0], cols[-1] + 1))], axis=1)
    fig = head_heatmap(pattern, labels, causal=run.facts.causal, title="",
                       zmax=1.0 if norm == "0 to 1" else None, selected=token, rows=rows,
                       cols=shown_cols, scale=SCALES[scale], skip_first=skip, pinned=len(pins))
    st.plotly_chart(fig, width="stretch", key="explorer_heatmap", config={
        "toImageButtonOptions": {"format": "svg", "filename": f"head_{layer}_{head}"}})
    st.download_button("Download this head's pattern (CSV)",
                       lambda: head_csv(spec, prompt, layer, head),
                       file_name=f"pattern_L{layer}_H{head}.csv", mime="text/csv")


def head_csv(spec, prompt: str, layer: int, head: int) -> str:
    """One head's whole pattern as CSV, built when the button is pressed."""
    run = caches.run(spec, prompt)
    return pattern_csv(run.pattern(layer, head), run.tokens)


def tokens(run: AttentionRun, labels: list[str], weighting=None) -> None:
    """The prompt coloured by attention from (or to) the selected token, with its controls."""
    ss = st.session_state
    st.subheader("Tokens")
    c = st.columns([2, 2, 3])
    scope = c[0].radio("Colour by", list(SCOPES), key=K_SCOPE)
    direction = c[1].radio("Show", list(DIRECTIONS), key=K_DIR)
    weights = scoped_weights(run, SCOPES[scope], ss[K_LAYER], ss[K_HEAD], ss[K_TOKEN],
                             DIRECTIONS[direction], weighting)
    with c[2]:
        st.html(legend_html(weights))
        st.caption(f"Selected: {md(labels[ss[K_TOKEN]])}. Click a token to select it.")
    widgets.token_strip(token_spans(run.tokens, weights, ss[K_TOKEN], DIRECTIONS[direction]),
                        K_TOKENS, on_token_click)


def value_weighting(run: AttentionRun):
    """The toggle, and the run's value weighting while it is on (None while off or computing)."""
    on = st.toggle("Value-weighted: how much each head writes from each key", key=K_VW,
                   help="Each weight A[i, j] times ||v_j W_O|| (the size of what the head writes "
                        "when it reads key j), rows renormalised to sum to 1 (Kobayashi et al. "
                        "2020). A sink the head looks at but writes almost nothing from fades.")
    if not on:
        return None
    try:
        found = job_view.run_job(
            caches.weighting_key(run.spec, run.prompt), "Weighting every head by its values",
            caches.weighting_work(run.spec, run.prompt),
            cost=("weighting", run.facts.forward_flops(run.n_tokens)))
    except UserError as err:
        app_state.show_error(err)
        return None
    return None if found is job_view.MISSING else found


@st.fragment
def explorer_view(spec, prompt: str) -> None:
    """The whole interactive view; reruns alone on every click.

    Takes the run's key, not the run: Streamlit keeps a fragment's arguments (and a download's
    callable) for as long as the browser session lingers, which would pin a long prompt's q and k
    in memory after the shared store had let it go.
    """
    run = caches.run(spec, prompt)
    facts, labels = run.facts, run.labels()
    c = st.columns([1, 1, 2])
    c[0].selectbox("Layer", range(facts.n_layers), key=K_LAYER, on_change=remember)
    c[1].selectbox("Head", range(facts.n_heads), key=K_HEAD, on_change=remember)
    c[2].selectbox("Token (query)", range(run.n_tokens), key=K_TOKEN,
                   format_func=lambda i: labels[i],
                   on_change=lambda: (follow_token(st.session_state[K_TOKEN]), remember()))
    ss = st.session_state
    weighting = value_weighting(run)
    left, right = st.columns([1, 1])
    with left:
        st.subheader("All heads")
        st.caption("Each picture is one head's whole pattern (rows: queries, columns: keys), "
                   "max-pooled and scaled to its own strongest weight. Click one to open it.")
        cells = caches.thumbnails(run.spec, run.prompt, weighted=weighting is not None)
        shown = (run.spec, run.prompt, weighting is not None)
        if ss.get(K_GRID_SHOWN) == shown:
            cells = None  # this fragment rerun only moves the selection: keep 1.5 MB off the wire
        ss[K_GRID_SHOWN] = shown
        cell = 72 if facts.n_heads <= 6 else 52 if facts.n_heads <= 12 else 36
        widgets.head_grid(cells, facts.n_heads, f"{ss[K_LAYER]}.{ss[K_HEAD]}", K_GRID,
                          on_head_click, cell_px=cell)
    with right:
        st.subheader(f"Head {ss[K_LAYER]}.{ss[K_HEAD]}")
        detail(run, labels, weighting)
    tokens(run, labels, weighting)
    widgets.sync_url(app_state.link_query(
        ViewState(layer=ss[K_LAYER], head=ss[K_HEAD], token=ss[K_TOKEN]), run.prompt))
