"""Kernel check: the app's own attention kernel run on the model's q, k, v, head by head."""

import streamlit as st

from models.errors import UserError
from ui import session
from ui.sections import kernel
from ui.widgets import job_view

session.page_title("Kernel check")
st.caption(
    "The app ships its own attention kernel (FlashAttention-style: it never builds the "
    "full pattern, only a log-sum-exp per row). Here it runs on the model's own q, k and v "
    "for every head, and its output is compared with what the model computed."
)
model = session.active_model()
if model is not None:
    st.caption(kernel.header(model.facts))
    view = kernel.dtype_choice(kernel.current_view())
    try:
        found = kernel.report(model, session.current_prompt(), view.dtype)
    except UserError as err:
        session.show_error(err)
        found = job_view.MISSING
    if found is not job_view.MISSING:
        if found.n_prompt_tokens > len(found.tokens):
            st.warning(
                f"The prompt has {found.n_prompt_tokens:,} tokens; this page checks the "
                f"first {len(found.tokens):,}."
            )
        kernel.summary(found)
        heads = kernel.errors(found)
        kernel.head_view(found, heads, kernel.current_view())
        kernel.timings(found)
    kernel.link(kernel.current_view())
