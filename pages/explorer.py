"""Explorer: every head at a glance, one head in detail, and the prompt coloured by attention."""

from dataclasses import replace

import streamlit as st

import app_state
from models.capture.views import scoped_weights
from ui import caches, widgets
from viz.export import pattern_csv
from viz.heatmap import head_heatmap
from viz.token_view import token_spans
from viz.view_state import ViewState, clamp

K_LAYER, K_HEAD, K_TOKEN = "explorer_layer", "explorer_head", "explorer_token"
K_GRID, K_TOKENS, K_SCOPE, K_DIR = "explorer_grid", "explorer_tokens", "explorer_scope", "explorer_dir"
K_ROW0, K_COL0 = "explorer_row0", "explorer_col0"
WINDOW = 160
SCOPES = {"This head": "head", "Mean over the layer's heads": "layer", "Mean over all heads": "all"}
DIRECTIONS = {"What the token attends to": "from", "Which tokens attend to it": "to"}


def on_head_click() -> None:
    clicked = widgets.clicked_value(K_GRID)
    if clicked:
        layer, head = (int(part) for part in str(clicked).split("."))
        st.session_state[K_LAYER], st.session_state[K_HEAD] = layer, head


def on_token_click() -> None:
    clicked = widgets.clicked_value(K_TOKENS)
    if clicked is not None:
        st.session_state[K_TOKEN] = int(clicked)


def heatmap_window(n_tokens: int, token: int) -> tuple[slice, slice]:
    """Rows and columns of the heatmap: everything, or a movable window for long prompts."""
    if n_tokens <= WINDOW:
        return slice(0, n_tokens), slice(0, n_tokens)
    last = n_tokens - WINDOW
    moved = st.session_state.get("explorer_window_token") != token
    st.session_state["explorer_window_token"] = token
    for key in (K_ROW0, K_COL0):  # bring a newly selected query into view
        start = min(st.session_state.get(key, 0), last)
        if moved and not start <= token < start + WINDOW:
            start = min(max(token - WINDOW // 2, 0), last)
        st.session_state[key] = start
    st.caption(f"The prompt has {n_tokens} tokens: the heatmap shows {WINDOW} queries by "
               f"{WINDOW} keys at a time. Move the window with the sliders.")
    c = st.columns(2)
    row0 = c[0].slider("First query shown", 0, last, key=K_ROW0)
    col0 = c[1].slider("First key shown", 0, last, key=K_COL0)
    return slice(row0, row0 + WINDOW), slice(col0, col0 + WINDOW)


def seed_view(n_layers: int, n_heads: int, n_tokens: int) -> None:
    """Start from the shared link once, then keep the user's choices in range."""
    link = app_state.link_state()
    wanted = ViewState(layer=st.session_state.get(K_LAYER, link.layer),
                       head=st.session_state.get(K_HEAD, link.head),
                       token=st.session_state.get(K_TOKEN, link.token))
    if wanted.token is None:
        wanted = replace(wanted, token=n_tokens - 1)
    fixed, notes = clamp(wanted, n_layers, n_heads, n_tokens)
    if K_LAYER not in st.session_state:
        for note in notes + app_state.link_notes():
            st.info(note)
    st.session_state[K_LAYER], st.session_state[K_HEAD] = fixed.layer, fixed.head
    st.session_state[K_TOKEN] = fixed.token


app_state.page_title("Explorer")
model, run = app_state.model_and_run()
if run is not None:
    facts = run.facts
    st.caption(
        f"**{facts.name}** · {facts.n_layers} layers × {facts.n_heads} heads "
        f"({facts.attention_kind}, {facts.n_kv_heads} key/value heads) · d_head {facts.d_head} · "
        f"{'causal' if facts.causal else 'bidirectional (no causal mask)'} · "
        f"positions: {facts.positional} · {run.n_tokens} tokens")
    if run.first_is_special:
        st.caption(f"Position 0 is `{run.tokens[0]}`, a special token the tokenizer adds; "
                   "heads often park attention there.")
    seed_view(facts.n_layers, facts.n_heads, run.n_tokens)
    labels = run.labels()
    c = st.columns([1, 1, 2, 2])
    c[0].selectbox("Layer", range(facts.n_layers), key=K_LAYER)
    c[1].selectbox("Head", range(facts.n_heads), key=K_HEAD)
    c[2].selectbox("Token (query)", range(run.n_tokens), key=K_TOKEN,
                   format_func=lambda i: labels[i])
    c[3].radio("Colour tokens by", list(SCOPES), key=K_SCOPE)
    layer, head, token = st.session_state[K_LAYER], st.session_state[K_HEAD], st.session_state[K_TOKEN]

    left, right = st.columns([2, 3])
    with left:
        st.subheader("All heads")
        st.caption("Click a thumbnail to open that head. Rows: queries, columns: keys.")
        with st.spinner("Drawing thumbnails…"):
            cells = caches.thumbnails(model.spec, run.prompt)
        widgets.head_grid(cells, facts.n_heads, f"{layer}.{head}", K_GRID, on_head_click)
    with right:
        st.subheader(f"Head {layer}.{head}")
        rows, cols = heatmap_window(run.n_tokens, token)
        fig = head_heatmap(run.window(layer, head, rows, cols), labels, causal=facts.causal,
                           title=f"Head {layer}.{head}", selected=token, rows=rows, cols=cols)
        fmt = st.segmented_control("Image format", ["png", "svg"], default="png",
                                   key="explorer_img_fmt") or "png"
        st.plotly_chart(fig, width="stretch", config={
            "toImageButtonOptions": {"format": fmt, "filename": f"head_{layer}_{head}"}})
        st.download_button("Download this head's pattern (CSV)",
                           lambda: pattern_csv(run.pattern(layer, head), run.tokens),
                           file_name=f"pattern_L{layer}_H{head}.csv", mime="text/csv")

    st.subheader("Tokens")
    direction = st.radio("Show", list(DIRECTIONS), key=K_DIR, horizontal=True)
    weights = scoped_weights(run, SCOPES[st.session_state[K_SCOPE]], layer, head, token,
                             DIRECTIONS[direction])
    st.caption(f"Click a token to select it. Selected: {labels[token]}.")
    widgets.token_strip(token_spans(run.tokens, weights, token, DIRECTIONS[direction]),
                         K_TOKENS, on_token_click)
    widgets.sync_url(app_state.link_query(ViewState(layer=layer, head=head, token=token)))
