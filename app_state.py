"""Where Streamlit meets the core: the shared sidebar, session keys, links and user messages.

Pages call :func:`active_model` and :func:`active_run`; both show their own message on the page
and return ``None`` when there is nothing to show. Every failure meant for the user is a
:class:`models.errors.UserError`, and :func:`show_error` is the one place that renders it. The
caches live in :mod:`ui.caches`.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import torch
import streamlit as st

from models.capture.run import AttentionRun
from models.errors import UserError
from models.model.loading import LoadedModel, ModelLoadError
from models.model.spec import BUNDLED, MINILM, ModelSpec
from ui import caches
from viz.view_state import ViewState, from_query, to_query

EXAMPLE_PROMPTS = {
    "Repeated sentence (induction)": (
        "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog."),
    "Python code": "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n",
    "Names (duplicate tokens)": (
        "When Mary and John went to the store, John gave a drink to Mary."),
    "Random letters, twice": "q x f k z m w p q x f k z m w p",
}
SOURCES = {
    "Bundled GPT-2 (offline)": BUNDLED,
    "all-MiniLM-L6-v2 (encoder)": MINILM,
    "Hugging Face name": "hub",
    "Local directory": "local",
}
PLACEMENTS = {"One device": None, "Spread over devices (auto)": "auto",
              "Spread evenly (balanced)": "balanced", "Fill devices in order (sequential)":
              "sequential"}
MAX_LINK_PROMPT = 2000
K_SOURCE, K_NAME, K_DEVICE, K_DTYPE = "atlas_source", "atlas_name", "atlas_device", "atlas_dtype"
K_TRUST, K_PROMPT, K_GOOD, K_FAILED = "atlas_trust", "atlas_prompt", "atlas_good", "atlas_failed"
K_LINK, K_NOTES, K_PLACEMENT = "atlas_link", "atlas_link_notes", "atlas_placement"


def ensure_navigation() -> None:
    """Route a page opened by its own URL through app.py.

    A fresh server whose first visitor opens ``/kernel`` (say) runs Streamlit's old
    ``pages/`` directory mode, which executes the page file alone: no sidebar, no navigation.
    :func:`page_title` calls it first; it switches that mode off and reruns through app.py.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def page_title(title: str) -> None:
    """Every page starts here: route through app.py if needed, then the title."""
    ensure_navigation()
    st.title(title)


def model_and_run() -> tuple[LoadedModel | None, AttentionRun | None]:
    """The sidebar's model and its patterns on the sidebar's prompt (messages shown as needed)."""
    model = active_model()
    return model, (active_run(model) if model else None)


def devices() -> list[str]:
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def show_error(err: UserError) -> None:
    """Render a failure meant for the user, at its own level; the one place that does."""
    {"info": st.info, "warning": st.warning, "error": st.error}[err.level](str(err))


def _init_from_link() -> None:
    """Seed the sidebar from the URL once per session."""
    if K_LINK in st.session_state:
        return
    link, notes = from_query(st.query_params.to_dict())
    st.session_state[K_LINK] = link
    st.session_state[K_NOTES] = notes
    model = link.model or BUNDLED
    if model in (BUNDLED, MINILM):
        st.session_state[K_SOURCE] = next(k for k, v in SOURCES.items() if v == model)
    else:
        is_dir = model.startswith(("/", ".", "~"))
        st.session_state[K_SOURCE] = "Local directory" if is_dir else "Hugging Face name"
        st.session_state[K_NAME] = model
    st.session_state[K_PROMPT] = link.prompt if link.prompt is not None else next(
        iter(EXAMPLE_PROMPTS.values()))


def link_state() -> ViewState:
    """The view the page was opened with (layer/head/token from the URL)."""
    return st.session_state.get(K_LINK, ViewState())


def _use_example() -> None:
    choice = st.session_state.get("atlas_example")
    if choice in EXAMPLE_PROMPTS:
        st.session_state[K_PROMPT] = EXAMPLE_PROMPTS[choice]


def sidebar() -> None:
    """Model picker, device, dtype and prompt; shared by every page."""
    _init_from_link()
    with st.sidebar:
        st.subheader("Model")
        source = st.selectbox("Source", list(SOURCES), key=K_SOURCE)
        kind = SOURCES[source]
        if kind == "hub":
            st.text_input("Hugging Face name", key=K_NAME, placeholder="gpt2, EleutherAI/pythia-70m")
        elif kind == "local":
            st.text_input("Directory (Hugging Face format)", key=K_NAME,
                          placeholder="/path/to/model")
        cols = st.columns(2)
        cols[0].selectbox("Device", devices(), key=K_DEVICE)
        cols[1].selectbox("Dtype", ["float32", "bfloat16", "float16"], key=K_DTYPE)
        st.selectbox("Placement", list(PLACEMENTS), key=K_PLACEMENT,
                     help="For models larger than one device: accelerate spreads the layers "
                          "over the GPUs and the CPU.")
        if kind in ("hub", "local"):
            st.checkbox("Trust remote code", key=K_TRUST, value=False,
                        help="Runs Python code from the model's repository. Only for repos you trust.")
        st.subheader("Prompt")
        st.selectbox("Examples", ["—"] + list(EXAMPLE_PROMPTS), key="atlas_example",
                      on_change=_use_example)
        st.text_area("Prompt", key=K_PROMPT, height=150)


def requested_spec() -> ModelSpec | None:
    kind = SOURCES[st.session_state.get(K_SOURCE, next(iter(SOURCES)))]
    name = kind if kind in (BUNDLED, MINILM) else (st.session_state.get(K_NAME) or "").strip()
    if not name:
        return None
    trust = bool(st.session_state.get(K_TRUST, False)) and kind in ("hub", "local")
    placement = PLACEMENTS.get(st.session_state.get(K_PLACEMENT, "One device"))
    return ModelSpec(name=name, device=st.session_state.get(K_DEVICE, "cpu"),
                     dtype=st.session_state.get(K_DTYPE, "float32"), trust_remote_code=trust,
                     device_map=placement)


def _load_with_progress(spec: ModelSpec) -> LoadedModel:
    with st.spinner(f"Loading {spec.label} on {spec.device}: its size is checked against free "
                    "memory first (cached after the first time)…"):
        return caches.model(spec)


def active_model() -> LoadedModel | None:
    """The model the sidebar asks for, or the last one that loaded, with a message on failure."""
    spec = requested_spec()
    if spec is None:
        st.info("Type a Hugging Face name or a directory in the sidebar to load a model.")
    failed = st.session_state.get(K_FAILED)
    if spec is not None and failed and failed[0] == spec:
        show_error(failed[1])
        spec = None
    elif spec is not None:
        try:
            model = _load_with_progress(spec)
            st.session_state[K_GOOD] = spec
            st.session_state.pop(K_FAILED, None)
            return model
        except ModelLoadError as err:
            st.session_state[K_FAILED] = (spec, err)
            show_error(err)
    good = st.session_state.get(K_GOOD)
    if good is None:
        return None
    st.caption(f"Still showing the last model that loaded: **{good.label}**.")
    return _load_with_progress(good)


def current_prompt() -> str:
    return st.session_state.get(K_PROMPT, "")


def active_run(model: LoadedModel) -> AttentionRun | None:
    """Patterns for the sidebar prompt on ``model``, with notices for empty or cut prompts."""
    prompt = current_prompt()
    try:
        with st.spinner("Running the prompt through the model…"):
            run = caches.run(model.spec, prompt)
    except UserError as err:
        show_error(err)
        return None
    if run.truncated:
        st.warning(f"The prompt has {run.n_prompt_tokens:,} tokens; {model.facts.name} reads at "
                   f"most {model.facts.n_ctx:,}, so only the first {run.n_tokens:,} are shown.")
    return run


def link_query(view: ViewState) -> dict[str, str]:
    """Query parameters of ``view`` for the current model and prompt (long prompts left out)."""
    spec = st.session_state.get(K_GOOD)
    prompt = current_prompt()
    return to_query(replace(view, model=spec.name if spec else None,
                            prompt=prompt if len(prompt) <= MAX_LINK_PROMPT else None))


def explorer_link(layer: int, head: int, token: int | None = None) -> str:
    """Relative URL that opens the explorer on ``layer.head`` for the current model and prompt."""
    return "./?" + urlencode(link_query(ViewState(layer=layer, head=head, token=token)))


def link_notes() -> list[str]:
    return st.session_state.get(K_NOTES, [])
