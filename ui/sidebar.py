"""The shared sidebar: which model (source, device, dtype, placement) and which prompt.

Session keys start with ``atlas_``; a link's model and prompt seed them once per session.
"""

from __future__ import annotations

import streamlit as st
import torch

from models.model.spec import BUNDLED, MINILM, SMOLLM2, ModelSpec
from ui import policy, prompt_store
from ui.examples import default_prompt, examples_for
from viz.view_state import ViewState, from_query

SOURCES = {
    "Bundled GPT-2 (offline)": BUNDLED,
    "SmolLM2-135M (offline)": SMOLLM2,
    "all-MiniLM-L6-v2 (encoder)": MINILM,
    "Hugging Face name": "hub",
    "Local directory": "local",
    "GGUF file": "gguf",
}
NAMED = (BUNDLED, SMOLLM2, MINILM)
TYPED = {"hub": ("Hugging Face name", "gpt2, EleutherAI/pythia-70m"),
         "local": ("Directory (Hugging Face format)", "/path/to/model"),
         "gguf": ("Path to a .gguf file", "/path/to/model.Q4_K_M.gguf")}
PLACEMENTS = {"One device": None, "Spread over devices (auto)": "auto",
              "Spread evenly (balanced)": "balanced", "Fill devices in order (sequential)":
              "sequential"}
K_SOURCE, K_NAME, K_DEVICE, K_DTYPE = "atlas_source", "atlas_name", "atlas_device", "atlas_dtype"
K_TRUST, K_PROMPT, K_EXAMPLE = "atlas_trust", "atlas_prompt", "atlas_example"
K_LINK, K_NOTES, K_PLACEMENT = "atlas_link", "atlas_link_notes", "atlas_placement"


def devices() -> list[str]:
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def source_kind() -> str:
    return SOURCES[st.session_state.get(K_SOURCE, next(iter(SOURCES)))]


def seed_from_link() -> None:
    """Seed the sidebar from the URL once per session."""
    if K_LINK in st.session_state:
        return
    link, notes = from_query(st.query_params.to_dict())
    st.session_state[K_LINK] = link
    st.session_state[K_NOTES] = notes
    model = link.model or BUNDLED
    kind = ModelSpec(model).kind
    if model in NAMED:
        st.session_state[K_SOURCE] = next(k for k, v in SOURCES.items() if v == model)
    else:
        st.session_state[K_SOURCE] = next(k for k, v in SOURCES.items()
                                          if v == {"gguf": "gguf", "local": "local"}.get(kind,
                                                                                        "hub"))
        st.session_state[K_NAME] = model
    prompt = link.prompt
    if prompt is None and link.prompt_id is not None:
        prompt = prompt_store.load(link.prompt_id)
        if prompt is None:
            notes.append(f"This link points to a stored prompt (id {link.prompt_id[:16]}) that "
                         "this server does not hold: it may come from another server or have "
                         "expired. The default example is shown instead; paste the text into "
                         "the sidebar to see it.")
    st.session_state[K_PROMPT] = prompt if prompt is not None else default_prompt(source_kind())


def link_state() -> ViewState:
    """The view the page was opened with (layer/head/token from the URL)."""
    return st.session_state.get(K_LINK, ViewState())


def link_notes() -> list[str]:
    return st.session_state.get(K_NOTES, [])


def _use_example() -> None:
    choice = st.session_state.get(K_EXAMPLE)
    examples = examples_for(source_kind())
    if choice in examples:
        st.session_state[K_PROMPT] = examples[choice]


def sidebar() -> None:
    """Model picker, device, dtype and prompt; shared by every page."""
    seed_from_link()
    with st.sidebar:
        st.subheader("Model")
        kind = SOURCES[st.selectbox("Source", list(SOURCES), key=K_SOURCE)]
        if kind in TYPED:
            label, placeholder = TYPED[kind]
            st.text_input(label, key=K_NAME, placeholder=placeholder)
        if kind == SMOLLM2:
            st.caption("SmolLM2-135M-Instruct: 30 layers × 9 heads (3 key/value heads), RoPE. "
                       "The first use converts its GGUF file once (about a minute).")
        cols = st.columns(2)
        cols[0].selectbox("Device", devices(), key=K_DEVICE)
        cols[1].selectbox("Dtype", ["float32", "bfloat16", "float16"], key=K_DTYPE)
        st.selectbox("Placement", list(PLACEMENTS), key=K_PLACEMENT,
                     help="For models larger than one device: accelerate spreads the layers "
                          "over the GPUs and the CPU.")
        if kind in ("hub", "local") and policy.allow_remote_code():
            st.checkbox("Trust remote code", key=K_TRUST, value=False,
                        help="Runs Python code from the model's repository on this server. The "
                             "operator allowed it (ATLAS_ALLOW_REMOTE_CODE); tick it only for "
                             "repositories you trust.")
        st.subheader("Prompt")
        st.selectbox("Examples", ["—"] + list(examples_for(kind)), key=K_EXAMPLE,
                     on_change=_use_example)
        st.text_area("Prompt", key=K_PROMPT, height=150)


def requested_spec() -> ModelSpec | None:
    """The model the sidebar asks for, or None while a typed name is still empty."""
    kind = source_kind()
    name = kind if kind in NAMED else (st.session_state.get(K_NAME) or "").strip()
    if not name:
        return None
    trust = (bool(st.session_state.get(K_TRUST, False)) and kind in ("hub", "local")
             and policy.allow_remote_code())
    placement = PLACEMENTS.get(st.session_state.get(K_PLACEMENT, "One device"))
    return ModelSpec(name=name, device=st.session_state.get(K_DEVICE, "cpu"),
                     dtype=st.session_state.get(K_DTYPE, "float32"), trust_remote_code=trust,
                     device_map=placement)


def current_prompt() -> str:
    return st.session_state.get(K_PROMPT, "")
