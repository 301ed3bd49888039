"""Where Streamlit meets the core: the shared sidebar, session keys, links and user messages.

Pages call :func:`active_model` and :func:`active_run`; both show their own message on the page
and return ``None`` when there is nothing to show. Every failure meant for the user is a
:class:`models.errors.UserError`, and :func:`show_error` is the one place that renders it. The
caches live in :mod:`ui.caches`.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import streamlit as st

from models.capture.run import AttentionRun, capture
from models.errors import UserError
from models.model.forward import tokenize
from models.model.loading import LoadedModel, ModelLoadError
from models.model.spec import ModelSpec
from models.model import gguf
from ui import caches, job_view, policy, prompt_store
from ui.text import md
from ui import sidebar as ui_sidebar
from viz.view_state import ViewState, to_query

MAX_LINK_PROMPT = 2000
K_GOOD, K_FAILED, K_LAST_RUN = "atlas_good", "atlas_failed", "atlas_last_run"
current_prompt = ui_sidebar.current_prompt
link_state = ui_sidebar.link_state
link_notes = ui_sidebar.link_notes


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


def show_error(err: UserError) -> None:
    """Render a failure meant for the user, at its own level; the one place that does."""
    {"info": st.info, "warning": st.warning, "error": st.error}[err.level](md(err))


def _converted(spec: ModelSpec) -> bool:
    """Convert a GGUF source once, as a job with progress; False while that is still running."""
    path = spec.gguf_file
    if path is None or gguf.is_converted(path):
        return True
    gguf.header(path)  # a clear message at once for a file that is not GGUF
    done = job_view.run_job(
        ("convert", str(path), gguf.content_hash(path)),
        f"Converting {path.name} to a Hugging Face checkpoint (once; about "
        f"{gguf.CONVERSION_SECONDS} s for SmolLM2 on 2 cores; later loads take seconds)",
        lambda progress: gguf.convert(path, progress), estimate_s=gguf.CONVERSION_SECONDS)
    return done is not job_view.MISSING


def _load_with_progress(spec: ModelSpec) -> LoadedModel | None:
    if not _converted(spec):
        return None
    with st.spinner(f"Loading {md(spec.label)} on {spec.device}: its size is checked against free "
                    "memory first (cached after the first time)…"):
        return caches.model(spec)


def active_model() -> LoadedModel | None:
    """The model the sidebar asks for, or the last one that loaded, with a message on failure."""
    spec = ui_sidebar.requested_spec()
    if spec is None:
        st.info("Type a Hugging Face name or a directory in the sidebar to load a model.")
    else:
        try:
            spec = policy.visitor_spec(spec)
        except ModelLoadError as err:
            show_error(err)
            spec = None
    failed = st.session_state.get(K_FAILED)
    if spec is not None and failed and failed[0] == spec:
        show_error(failed[1])
        spec = None
    elif spec is not None:
        try:
            model = _load_with_progress(spec)
            if model is None:
                return None
            st.session_state[K_GOOD] = spec
            st.session_state.pop(K_FAILED, None)
            return model
        except ModelLoadError as err:
            st.session_state[K_FAILED] = (spec, err)
            show_error(err)
    good = st.session_state.get(K_GOOD)
    if good is None:
        return None
    st.caption(f"Still showing the last model that loaded: **{md(good.label)}**.")
    return _load_with_progress(good)


def active_run(model: LoadedModel) -> AttentionRun | None:
    """Patterns for the sidebar prompt on ``model``, with notices for empty or cut prompts.

    A long prompt runs as a job with progress and Cancel; meanwhile the page keeps showing this
    session's previous run (with a note), or nothing on a first visit.
    """
    prompt, cap = current_prompt(), policy.max_prompt_tokens()
    key = caches.run_key(model.spec, prompt, cap)
    try:
        ids, _ = tokenize(model, prompt, cap)
        n = int(ids.shape[1])
        run = job_view.run_job(
            key, f"Reading the attention of {n:,} tokens in {md(model.facts.name)}",
            lambda progress: capture(model, prompt, max_tokens=cap, progress=progress),
            cost=("capture", model.facts.forward_flops(n)))
    except UserError as err:
        show_error(err)
        return None
    if run is job_view.MISSING:
        previous = caches.POOL.results.get(st.session_state.get(K_LAST_RUN))
        if previous is None:
            return None
        st.caption("Showing the previous prompt until the new one is ready.")
        run = previous
    else:
        st.session_state[K_LAST_RUN] = key
    if run.truncated:
        limit = (f"{md(model.facts.name)} reads at most {model.facts.n_ctx:,}"
                 if cap is None or cap >= model.facts.n_ctx
                 else f"this server runs prompts of at most {cap:,} tokens")
        st.warning(f"The prompt has {run.n_prompt_tokens:,} tokens; {limit}, so only the first "
                   f"{run.n_tokens:,} are shown.")
    return run


def link_query(view: ViewState, prompt: str | None = None) -> dict[str, str]:
    """Query parameters of ``view`` for the current model and ``prompt`` (the sidebar's by
    default). A prompt over :data:`MAX_LINK_PROMPT` characters is stored on the server and the
    link carries its id."""
    spec = st.session_state.get(K_GOOD)
    prompt = current_prompt() if prompt is None else prompt
    short = len(prompt) <= MAX_LINK_PROMPT
    return to_query(replace(view, model=spec.name if spec else None,
                            prompt=prompt if short else None,
                            prompt_id=None if short or not prompt.strip()
                            else prompt_store.save(prompt)))


def explorer_link(layer: int, head: int, token: int | None = None,
                  prompt: str | None = None) -> str:
    """Relative URL that opens the explorer on ``layer.head`` for the current model and
    ``prompt`` (the sidebar's by default)."""
    return "./?" + urlencode(link_query(ViewState(layer=layer, head=head, token=token), prompt))
