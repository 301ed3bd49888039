"""Explorer: every head at a glance, one head in detail, and the prompt coloured by attention."""

import streamlit as st

from ui import session
from ui.sections import explorer

session.page_title("Explorer")
st.caption(
    "What am I looking at: each head of each layer decides how much every token (a row, "
    "the query) reads from every token it can see (a column, the key: the earlier ones in "
    "a causal model, all of them in an encoder such as MiniLM). Bright cells are "
    "where it looks. Pick a head from the grid, then a token below to see where it looks."
)
model, run = session.model_and_run()
if run is not None:
    key = session.shown_run_key()
    precision = explorer.intro(run)
    explorer.sink_hint(run, key)
    explorer.full_run()
    explorer.explorer_view(key)
    explorer.precision_note(run, key, precision)  # last: the float32 check waits for the view
