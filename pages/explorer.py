"""Explorer: every head at a glance, one head in detail, and the prompt coloured by attention."""

import streamlit as st

import app_state
from pages import _explorer_views as views
from ui.text import md

app_state.page_title("Explorer")
st.caption("What am I looking at: each head of each layer decides how much every token (a row, "
           "the query) reads from every earlier token (a column, the key). Bright cells are "
           "where it looks. Pick a head from the grid, then a token below to see where it looks.")
model, run = app_state.model_and_run()
if run is not None:
    facts = run.facts
    st.caption(
        f"**{md(facts.name)}** · {facts.n_layers} layers × {facts.n_heads} heads "
        f"({facts.attention_kind}, {facts.n_kv_heads} key/value heads) · d_head {facts.d_head} · "
        f"{'causal' if facts.causal else 'bidirectional (no causal mask)'} · "
        f"positions: {facts.positional} · {run.n_tokens:,} tokens")
    if run.spec is not None and run.spec.kind == "bundled":
        st.caption("The bundled model is a small toy trained on Python. For a real language "
                   "model's induction heads and attention sinks, choose **SmolLM2-135M (offline)** "
                   "in the sidebar and the example *A paragraph, twice*.")
    if run.first_is_special:
        st.caption(f"Position 0 is {md(run.tokens[0])}, a special token the tokenizer adds; "
                   "many heads park attention there (an attention sink).")
    views.full_run()
    views.seed_view(run)
    views.explorer_view(run.spec, run.prompt)
