"""Where Streamlit meets the core: this session's model and run, links, and the one error renderer.

Every page gets its model through :func:`active_model`, which takes the sidebar's choice through
the operator's policy (:func:`ui.runtime.policy.admit`) before the model store will load it, and
its patterns through :func:`active_run`. Both show their own message and return ``None`` when
there is nothing to show. Every failure meant for the user is a
:class:`models.errors.UserError`; :func:`show_error` is the one place that renders it. Anything
else that escapes a page or a fragment (:func:`guarded`) is logged with its traceback for the
operator and shown to the visitor as one line, never as Streamlit's exception box.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlencode

import streamlit as st

from models.capture.run import AttentionRun, capture
from models.cost import Cost, device_of
from models.disk_budget import make_room
from models.errors import ModelLoadError, UserError
from models.head import Head
from models.model import gguf
from models.model.facts import ModelFacts
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from models.progress import Progress
from ui import links
from ui.keys import Session, Sidebar
from ui.runtime import server
from ui.runtime.job_keys import ConvertKey, RunKey
from ui.runtime.jobs import Work
from ui.runtime.policy import AllowedSpec, admit
from ui.sections.examples import default_prompt
from ui.session_state import forget, keep, seed_widgets
from ui.state.explorer import ExplorerView
from ui.state.sidebar import DEFAULT_CHOICE, ModelChoice, choice_from_link
from ui.text import md
from ui.widgets import job_view

UNEXPECTED = (
    "Something went wrong on the server while drawing this part of the page; the details are "
    "in the server's log for its operator. Change a setting, or reload the page, to go on."
)
log = logging.getLogger(__name__)
P = ParamSpec("P")
DISK_SHARES = 2  # converted checkpoints and pruned exports each get half of ATLAS_DISK_MB


def start() -> None:
    """Start the server's shared runtime (once per process; app.py calls it every run)."""
    server.start(alive=job_view.session_alive)


def ensure_navigation() -> None:
    """Route a page opened by its own URL through app.py.

    A fresh server whose first visitor opens ``/kernel`` (say) runs Streamlit's old
    ``pages/`` directory mode, which executes the page file alone: no sidebar, no navigation.
    Every page calls :func:`page_title` first; it switches that mode off and reruns.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def page_title(title: str) -> None:
    """Every page starts here: route through app.py if needed, then the title."""
    ensure_navigation()
    st.title(title)


def show_error(err: UserError) -> None:
    """Render a failure meant for the user, at its own level; the one place that does."""
    {"info": st.info, "warning": st.warning, "error": st.error}[err.level](md(err))


def show_failure(err: Exception) -> None:
    """Any failure that reached the top of a page: a :class:`UserError` as its message; anything
    else logged with its traceback for the operator, and one line for the visitor."""
    if isinstance(err, UserError):
        show_error(err)
        return
    log.error("a page failed: %s", type(err).__name__, exc_info=err)
    st.error(UNEXPECTED)


@contextmanager
def guarded() -> Iterator[None]:
    """Run a page (or a fragment) so that nothing it raises reaches Streamlit's exception box.

    Streamlit's own rerun and stop signals are not exceptions of this kind (``BaseException``)
    and pass through.
    """
    try:
        yield
    except Exception as err:  # noqa: BLE001 - the last line of defence: shown, logged
        show_failure(err)


def guard(draw: Callable[P, None]) -> Callable[P, None]:
    """``draw`` run under :func:`guarded` (for a fragment, which reruns on its own)."""

    @functools.wraps(draw)
    def guarded_draw(*args: P.args, **kwargs: P.kwargs) -> None:
        with guarded():
            draw(*args, **kwargs)

    return guarded_draw


# --- what the session was opened with -------------------------------------------------------


def seed_from_link() -> None:
    """Read the URL once per session: the sidebar's widgets start from its model, dtype and
    prompt (the defaults of :class:`ui.state.sidebar.ModelChoice` where it names none), and each
    page takes its own state from it on its first visit."""
    if Session.LINK in st.session_state:
        return
    link = links.parse(st.query_params.to_dict(), server.current().prompts.load)
    keep(Session.LINK, link)
    keep(Session.LINK_NOTES, list(link.notes.get("sidebar", ())))
    choice = choice_from_link(link.shared.model, link.shared.dtype)
    prompt = link.shared.prompt
    seed_widgets(
        {
            Sidebar.SOURCE: choice.source,
            Sidebar.NAME: choice.name,
            Sidebar.DTYPE: choice.dtype,
            Sidebar.DEVICE: choice.device,
            Sidebar.PLACEMENT: choice.placement,
            Sidebar.TRUST: choice.trust,
            Sidebar.PROMPT: prompt if prompt is not None else default_prompt(choice.source),
        }
    )


def opened_with() -> links.Link:
    """What the URL the session was opened with asked for (every page's state)."""
    found = st.session_state.get(Session.LINK)
    return found if isinstance(found, links.Link) else links.Link()


def link_notes(page: links.Page) -> list[str]:
    """What the opening link asked for that ``page`` could not show; the sidebar's part is told
    once, on the first page that asks."""
    shared = list(st.session_state.get(Session.LINK_NOTES, []))
    forget(Session.LINK_NOTES)
    return [*shared, *opened_with().notes.get(page, ())]


V = TypeVar("V")


def stored_view(key: str, page: links.Page, kind: type[V]) -> V:
    """A page's state value kept under ``key``, or (before the page keeps one) the one its
    opening link asked for; nothing is stored or shown."""
    found = st.session_state.get(key)
    if isinstance(found, kind):
        return found
    view = getattr(opened_with(), page)
    if not isinstance(view, kind):
        raise TypeError(f"The link holds no {kind.__name__} for the {page} page")
    return view


def page_view(key: str, page: links.Page, kind: type[V]) -> V:
    """A page's state value kept under ``key``: the one its opening link asked for on the first
    visit (with the link's notes for ``page``), then as the visitor changed it."""
    found = st.session_state.get(key)
    if isinstance(found, kind):
        return found
    for note in link_notes(page):
        st.caption(md(note))
    return keep(key, stored_view(key, page, kind))


def _from_widget(store: str, key: str, change: Callable[[Any, Any], Any]) -> None:
    keep(store, change(st.session_state[store], st.session_state[key]))


def bound(store: str, key: str, value: Any, change: Callable[[V, Any], V]) -> dict[str, Any]:
    """Seed widget ``key`` with ``value`` (read from the page's state value kept under
    ``store``) and return the widget's ``key``, ``on_change`` and ``args``: its callback
    replaces the state value by ``change(state, widget value)``, so the value stays the one
    source of what the page shows and the widget only displays it."""
    seed_widgets({key: value})
    return {"key": key, "on_change": _from_widget, "args": (store, key, change)}


def current_prompt() -> str:
    return str(st.session_state.get(Sidebar.PROMPT, ""))


def model_choice() -> ModelChoice:
    """The sidebar's model widgets as one value (their defaults: ``ModelChoice()``'s)."""
    ss, default = st.session_state, DEFAULT_CHOICE
    return ModelChoice(
        source=ss.get(Sidebar.SOURCE, default.source),
        name=ss.get(Sidebar.NAME) or default.name,
        device=ss.get(Sidebar.DEVICE, default.device),
        dtype=ss.get(Sidebar.DTYPE, default.dtype),
        placement=ss.get(Sidebar.PLACEMENT, default.placement),
        trust=bool(ss.get(Sidebar.TRUST, default.trust)),
    )


# --- the one door to a model -----------------------------------------------------------------


def requested() -> AllowedSpec | None:
    """The sidebar's model through the operator's policy; a refusal is shown on the page."""
    settings = server.current().settings
    spec = model_choice().spec(settings.allow_remote_code)
    if spec is None:
        st.info("Type a Hugging Face name or a directory in the sidebar to load a model.")
        return None
    try:
        return admit(spec, settings)
    except ModelLoadError as err:
        show_error(err)
        return None


def _converted(allowed: AllowedSpec) -> bool:
    """Convert a GGUF source once, as a job with progress; False while that is still running."""
    runtime = server.current()
    path = runtime.models.needs_conversion(allowed)
    if path is None:
        return True
    gguf.header(path)  # a clear message at once for a file that is not GGUF
    from models.model.loading import available_bytes, free_disk

    cache = runtime.settings.cache
    gguf.check_conversion_fits(path, available_bytes("cpu"), free_disk(cache))

    def work(progress: Progress) -> Path:
        make_room(
            gguf.converted_root(cache),
            runtime.settings.disk_bytes // DISK_SHARES,
            gguf.header(path).n_elements * 4,
            keep=[gguf.converted_dir(path, cache)],
        )
        return gguf.convert(path, progress, cache)

    done = job_view.run_job(
        ConvertKey(str(path), gguf.content_hash(path)),
        f"Converting {path.name} to a Hugging Face checkpoint (once; about "
        f"{gguf.CONVERSION_SECONDS} s for SmolLM2 on 2 cores; later loads take seconds)",
        work,
        cost=Cost(
            overhead_s=gguf.CONVERSION_SECONDS,
            peak_bytes=int(gguf.header(path).n_elements * 4 * gguf.CONVERSION_OVERHEAD),
        ),
    )
    return done is not job_view.MISSING


def load(allowed: AllowedSpec) -> ModelHandle | None:
    """The model for ``allowed`` (converting a GGUF file first, as a job); None while that
    runs."""
    if not _converted(allowed):
        return None
    runtime = server.current()
    found = runtime.models.loaded(allowed)
    if found is not None:
        return found
    with st.spinner(
        f"Loading {md(allowed.label)} on {allowed.spec.device}: its size is "
        "checked against free memory first (cached after the first time)…"
    ):
        return runtime.models.get(allowed)


def active_model() -> ModelHandle | None:
    """The model the sidebar asks for, or the last one that loaded, with a message on failure."""
    allowed = requested()
    failed = st.session_state.get(Session.FAILED_MODEL)
    if allowed is not None and failed and failed[0] == allowed:
        show_error(failed[1])
        allowed = None
    elif allowed is not None:
        try:
            model = load(allowed)
            if model is None:
                return None
            keep(Session.GOOD_MODEL, allowed)
            forget(Session.FAILED_MODEL)
            return model
        except ModelLoadError as err:
            keep(Session.FAILED_MODEL, (allowed, err))
            show_error(err)
    good = st.session_state.get(Session.GOOD_MODEL)
    if good is None:
        st.button(
            "Open the bundled model instead", on_click=_choose_bundled, key=Sidebar.BACK_TO_BUNDLED
        )
        return None
    st.caption(f"Still showing the last model that loaded: **{md(good.label)}**.")
    return load(good)


def _choose_bundled() -> None:
    seed_widgets({Sidebar.SOURCE: "bundled"})


def load_facts() -> ModelFacts | None:
    """Load the sidebar's model through the same door as every page (no prompt is run) and
    return its shape; None (and no message) when it is refused, fails or must be converted
    first."""
    runtime = server.current()
    spec = model_choice().spec(runtime.settings.allow_remote_code)
    try:
        allowed = admit(spec, runtime.settings) if spec is not None else None
        if allowed is None or runtime.models.needs_conversion(allowed) is not None:
            return None
        return runtime.models.get(allowed).facts
    except UserError:
        return None


def allowed_spec(model: ModelHandle) -> AllowedSpec:
    """The allowed spec ``model`` was loaded from (what keys its results)."""
    good = st.session_state.get(Session.GOOD_MODEL)
    if isinstance(good, AllowedSpec) and good.spec == model.spec:
        return good
    allowed = requested()
    if allowed is None or allowed.spec != model.spec:
        raise ModelLoadError("The model changed while this page ran; run it again.")
    return allowed


# --- the prompt's run ------------------------------------------------------------------------


def run_key(model: ModelHandle, prompt: str) -> RunKey:
    return RunKey(allowed_spec(model), prompt, server.current().settings.max_tokens)


def capture_work(model: ModelHandle, key: RunKey) -> Work[AttentionRun]:
    return lambda progress: capture(model, key.prompt, max_tokens=key.max_tokens, progress=progress)


def capture_cost(model: ModelHandle, n_tokens: int) -> Cost:
    return Cost(
        flops=model.facts.forward_flops(n_tokens),
        peak_bytes=model.facts.capture_bytes(n_tokens),
        device=device_of(model.spec.device),
    )


def active_run(model: ModelHandle) -> AttentionRun | None:
    """Patterns for the sidebar prompt on ``model``, with notices for empty or cut prompts.

    A long prompt runs as a job with progress and Cancel; meanwhile the page keeps showing this
    session's previous run, saying that it is the previous prompt.
    """
    key = run_key(model, current_prompt())
    try:
        ids, _ = tokenize(model, key.prompt, key.max_tokens)
        n = int(ids.shape[1])
        run = job_view.run_job(
            key,
            f"Reading the attention of {n:,} tokens in {model.facts.name}",
            capture_work(model, key),
            cost=capture_cost(model, n),
        )
    except UserError as err:
        show_error(err)
        return None
    if run is job_view.MISSING:
        last = st.session_state.get(Session.LAST_RUN)
        previous = server.current().results.get(last) if isinstance(last, RunKey) else None
        if previous is None:
            return None
        start = md(" ".join(previous.prompt.split()[:8]))
        if job_view.cancelled(key):
            st.warning(
                f"The view below still shows the previous prompt ({previous.n_tokens:,} "
                f"tokens, starting “{start} …”), not the sidebar's, which was stopped "
                "before it was read."
            )
        else:
            st.caption(
                f"Showing the previous prompt ({previous.n_tokens:,} tokens, starting "
                f"“{start} …”) until the sidebar's is ready."
            )
        run = previous
    else:
        keep(Session.LAST_RUN, key)
    server.current().results.pin(
        st.session_state[Session.LAST_RUN], job_view.session_id(), job_view.visitor_id()
    )
    if run.truncated:
        limit = (
            f"{md(model.facts.name)} reads at most {model.facts.n_ctx:,}"
            if key.max_tokens is None or key.max_tokens >= model.facts.n_ctx
            else f"this server runs prompts of at most {key.max_tokens:,} tokens"
        )
        st.warning(
            f"The prompt has {run.n_prompt_tokens:,} tokens; {limit}, so only the first "
            f"{run.n_tokens:,} are shown."
        )
    return run


def shown_run_key() -> RunKey:
    """The key of the run :func:`active_run` showed last (the previous prompt's while a new one
    is being read)."""
    key = st.session_state[Session.LAST_RUN]
    if not isinstance(key, RunKey):
        raise TypeError(f"{Session.LAST_RUN} holds {type(key).__name__}, not a RunKey")
    return key


def model_and_run() -> tuple[ModelHandle | None, AttentionRun | None]:
    """The sidebar's model and its patterns on the sidebar's prompt (messages shown as needed)."""
    model = active_model()
    return model, (active_run(model) if model else None)


# --- links -----------------------------------------------------------------------------------


def page_query(
    state: links.PageState, prompt: str | None = None, limit: int = links.MAX_LINK_TEXT
) -> dict[str, str]:
    """The query string that opens ``state``'s page as it is, on the model that loaded last, the
    sidebar's dtype and ``prompt`` (the sidebar's by default); see :func:`ui.links.query`."""
    good = st.session_state.get(Session.GOOD_MODEL)
    shared = links.Shared(
        model=good.name if isinstance(good, AllowedSpec) else None,
        dtype=model_choice().dtype,
        prompt=current_prompt() if prompt is None else prompt,
    )
    who = job_view.visitor_id()
    return links.query(shared, state, lambda text: server.current().prompts.save(text, who), limit)


def page_url(state: links.PageState, prompt: str | None = None) -> str:
    """Relative URL that opens ``state``'s page as it is (see :func:`page_query`)."""
    path = links.PAGE_PATHS[links.page_of(state)]
    return f"./{path}?" + urlencode(page_query(state, prompt))


def explorer_link(head: Head, token: int | None = None, prompt: str | None = None) -> str:
    """Relative URL that opens the explorer on ``head`` (and query ``token``) for the current
    model and ``prompt`` (the sidebar's by default)."""
    return page_url(ExplorerView(head=head, token=token), prompt)
