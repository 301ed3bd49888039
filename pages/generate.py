"""Generate: the model writes after the sidebar's prompt; where every head looked at each step,
the KV cache it fills, and what evicting that cache costs."""

import streamlit as st

from ui import session
from ui.sections import generate, generate_eviction, generate_kv, generate_steps

session.page_title("Generate")
st.caption(
    "What am I looking at: the model continues the sidebar's prompt one token at a time. "
    "Each new token is chosen by one forward step whose query (the position before it) "
    "reads every earlier key from the KV cache; below, every head's attention at each "
    "step, where it lands (the prompt, the model's own output, or the first token, an "
    "attention sink), the cache's size, and what a smaller cache costs."
)
model = session.active_model()
if model is None:
    st.stop()
generate.settings_form(model)
shown = generate.generation(model)
if shown is not None:
    generate_steps.generation_view(model, shown[0])

st.subheader("The KV cache, measured")
generate_kv.kv_section(model, shown[1] if shown is not None else None)

st.subheader("Cache eviction, as an experiment")
st.caption(
    "A long text read with a cache that holds at most B keys: once it is full, each new "
    "token evicts one. Perplexity (lower is better) shows what each policy costs. "
    "StreamingLLM found that evicting the first tokens wrecks Llama-2 (5.40 → 5,158) and "
    "that keeping four of them (attention sinks) beside the window repairs it (5.60)."
)
generate_eviction.eviction_section(model)
generate.sync_link()  # the address bar opens these settings (and this generation)
