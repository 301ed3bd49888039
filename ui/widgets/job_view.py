"""A job on a page: start costly work through the pool, show its place, progress, time left and
a Cancel button, and pick the result up when it is done.

Work that finishes within ``ATLAS_JOB_WAIT_S`` seconds is simply waited for, so a small model's
page draws in one run; so is light work (expected under three seconds) for up to
:data:`LIGHT_WAIT_S` seconds on a busy server, under a spinner. Anything longer leaves a progress
panel (a fragment that polls once a second) and the page carries on with what it had before.
Streaming work (given a :class:`ui.runtime.jobs.Partial`) skips the spinner: its panel shows
what it has produced so far, escaped, refreshed with the progress.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import CancelledError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Literal, TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from models.cost import Cost
from models.progress import Cancelled
from ui.keys import Session
from ui.runtime import server
from ui.runtime.jobs import Job, OverLimitError, Partial, Work, WorkerLost
from ui.runtime.store import JobKey
from ui.session_state import keep
from ui.text import md

LIGHT_WAIT_S = 15.0
STREAM_REFRESH_S = 0.3  # how often the panel of work that writes as it goes is redrawn


R = TypeVar("R")


class Missing(Enum):
    """The result is not ready yet (the page shows progress instead)."""

    MISSING = "missing"


MISSING: Final = Missing.MISSING
Pending = Literal[Missing.MISSING]


def session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


def visitor_id() -> str:
    """Who is asking: the client's address, so that every tab and every new session of one
    browser count as one visitor (Streamlit gives no address for loopback: those clients are
    one local visitor); the session where there is no client (a script run in tests)."""
    address = st.context.ip_address
    if address is None and len(st.context.headers) > 0:
        address = "local"
    return f"client:{address}" if address else session_id()


def session_alive(sid: str) -> bool:
    """Whether the browser session ``sid`` is still connected (True outside a server)."""
    from streamlit.runtime import Runtime

    if not sid or not Runtime.exists():
        return True
    return Runtime.instance().is_active_session(sid)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "time left unknown"
    if seconds < 60:
        return f"about {max(1, round(seconds))} s left"
    return f"about {seconds / 60:.0f} min left"


def expected_seconds(key: JobKey[Any], cost: Cost) -> float:
    """Seconds ``cost`` should take for a job of ``key``'s kind, at the rate this server
    measured for that kind (what a page states before the work starts)."""
    found = server.current().pool.estimate(key, cost)
    return cost.seconds() if found is None else found


def about(seconds: float) -> str:
    """``about 3 s`` or ``about 2 min``: what a button says its work will take."""
    return f"about {max(seconds, 1):.0f} s" if seconds < 90 else f"about {seconds / 60:.0f} min"


def asked(key: JobKey[Any]) -> bool:
    """Whether the visitor asked for the work of ``key``, or it has already finished (a page
    starts costly work only when asked, never on arrival)."""
    done = server.current().pool.finished(key)
    return done is not None or key in st.session_state.get(Session.ASKED, frozenset())


def ask(key: JobKey[Any]) -> None:
    """A start button's callback: the work of ``key`` may start."""
    keep(Session.ASKED, st.session_state.get(Session.ASKED, frozenset()) | {key})


def start_button(
    key: JobKey[Any],
    label: str,
    cost: Cost,
    button_key: str,
    primary: bool = True,
    help: str | None = None,
) -> bool:
    """Whether the work of ``key`` may run: asked for, or finished already. Until then, a
    button priced at this server's rate, ``label`` followed by ``, about N s)``, asks for it
    (a page starts costly work only when asked, never on arrival)."""
    if asked(key):
        return True
    st.button(
        f"{label}, {about(expected_seconds(key, cost))})",
        key=button_key,
        type="primary" if primary else "secondary",
        on_click=ask,
        args=(key,),
        help=help,
    )
    return False


def cancelled(key: JobKey[Any]) -> bool:
    """Whether this session stopped the job for ``key`` (and has not started it again)."""
    return key in st.session_state.get(Session.CANCELLED, frozenset())


def start_again(key: JobKey[Any]) -> None:
    """Forget that this session stopped the job for ``key``: asked again, it runs again."""
    keep(Session.CANCELLED, st.session_state.get(Session.CANCELLED, frozenset()) - {key})


@dataclass(frozen=True)
class Scale:
    """How a job's cost grows with one size of its input, so that a refusal can say how much
    would fit: ``cost_at(n)`` is the cost at size ``n`` (growing with ``n``), ``asked`` the
    size asked for, ``unit`` what the size counts (``"tokens"``)."""

    cost_at: Callable[[int], Cost]
    asked: int
    unit: str


def most_that_fits(key: JobKey[Any], scale: Scale) -> int:
    """The largest size below ``scale.asked`` whose cost the operator's limits allow for a job
    of ``key``'s kind (0 when not even 1 fits)."""
    pool = server.current().pool

    def fits(n: int) -> bool:
        try:
            pool.check("", scale.cost_at(n), key)
        except OverLimitError:
            return False
        return True

    low, high = 0, max(scale.asked - 1, 0)  # low fits (or is 0), high + 1 does not
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def refused_with_room(err: OverLimitError, key: JobKey[Any], scale: Scale) -> OverLimitError:
    """``err`` with how much would fit this server appended."""
    n = most_that_fits(key, scale)
    fit = (
        f"At most {n:,} {scale.unit} fit this server's limits."
        if n
        else f"Not even one of these {scale.unit} fits this server's limits."
    )
    return OverLimitError(f"{err} {fit}")


def refusal(
    key: JobKey[Any], label: str, cost: Cost, scale: Scale | None = None
) -> OverLimitError | None:
    """Why the server would refuse ``key``'s work (with how much would fit, given ``scale``),
    or None: a page that asks before it runs says so instead of offering a button that fails."""
    try:
        server.current().pool.check(label, cost, key)
    except OverLimitError as err:
        return err if scale is None else refused_with_room(err, key, scale)
    return None


def _button_key(prefix: str, key: JobKey[Any]) -> str:
    return f"{prefix}_{abs(hash(key))}"


def run_job(
    key: JobKey[R],
    label: str,
    work: Work[R],
    *,
    cost: Cost,
    wait_s: float | None = None,
    partial: Partial | None = None,
    background: str | None = None,
    scale: Scale | None = None,
) -> R | Pending:
    """The result of ``work`` for ``key`` (the type ``key`` declares), or :data:`MISSING` while
    it is still running. ``cost`` is what it will take, checked against the operator's limits
    before it starts and timed at this machine's measured rate for its kind.

    A stored result is pinned for this session (the store evicts it last while the tab is
    open). Raises whatever the work raised (a :class:`models.errors.UserError` for the page to
    show), including :class:`ui.runtime.jobs.RefusedError` for work over the operator's limits.
    After this session presses Cancel, the key is not started again until the visitor asks.
    ``partial``: where ``work`` writes what it has so far; the progress panel shows it.
    ``background``: the page does not wait for this work (a caption the view can do without):
    while it runs this line is shown, and the page is drawn again once it has finished.
    ``scale``: how the cost grows with the input; a refusal then says how much would fit.
    """
    runtime, sid = server.current(), session_id()
    found = runtime.pool.finished(key)
    if found is not None:
        runtime.results.pin(key, sid, visitor_id())
        return found
    cancelled = st.session_state.get(Session.CANCELLED, frozenset())
    if key in cancelled:
        st.info(f"Stopped: {md(label)}. Change a setting to run something else, or start it again.")
        if st.button("Start it again", key=_button_key("restart", key)):
            start_again(key)
            st.rerun()
        return MISSING
    try:
        job = runtime.pool.submit(key, label, work, waiter=sid, cost=cost, partial=partial)
    except OverLimitError as err:
        if scale is None:
            raise
        raise refused_with_room(err, key, scale) from None
    wait = runtime.settings.job_wait_s if wait_s is None else wait_s
    try:
        if background is not None and job.future is not None and not job.future.done():
            raise FutureTimeout
        value = _result(job, label, wait)
    except FutureTimeout:
        if background is not None:
            waiting_note(key, background)
        else:
            (streaming_panel if partial is not None else progress_panel)(key)
        return MISSING
    except CancelledError as err:
        raise Cancelled(f"Stopped: {label}.") from err
    except WorkerLost as err:
        st.error(md(err))
        st.button("Retry", key=_button_key("retry", key))  # its click runs the page again
        return MISSING
    runtime.results.pin(key, sid, visitor_id())
    return value


def _result(job: Job[R], label: str, wait_s: float) -> R:
    """The job's result within ``wait_s`` seconds; light work (under ``jobs.LIGHT_S`` expected)
    that runs past it gets up to :data:`LIGHT_WAIT_S` more under a spinner that names it, so
    the page still draws in one run (streaming
    work shows its panel instead: what it has so far beats a spinner).

    Raises:
        concurrent.futures.TimeoutError: still running.
    """
    assert job.future is not None
    try:
        return job.future.result(timeout=wait_s)
    except FutureTimeout:
        if not job.light or job.partial is not None:
            raise
    with st.spinner(f"{md(label)}…"):  # light work a little over the wait: not a busy server
        return job.future.result(timeout=LIGHT_WAIT_S)


def _status(job: Job[Any]) -> tuple[float, str]:
    ahead = server.current().pool.ahead(job)
    if ahead:
        return 0.0, (
            f"{md(job.label)}: waiting, {ahead} heavy job{'s' if ahead > 1 else ''} "
            f"ahead (one runs at a time on this server); then "
            f"{duration(job.estimate_s)}"
        )
    left, revised = job.left_for_display()
    note = " (revised: the server is busy)" if revised else ""
    return job.fraction, f"{md(job.label)}: {md(step_text(job))} · {duration(left)}{note}"


def step_text(job: Job[Any]) -> str:
    """The job's latest step, without repeating its label (work often reports both)."""
    text, label = job.text.strip(), job.label.strip().rstrip(".")
    if text.lower().startswith(label.lower()):
        text = text[len(label) :].lstrip(" :,-") or "working"
    return text


@st.fragment(run_every=1.0)
def progress_panel(key: JobKey[Any]) -> None:
    """Progress of the job computing ``key``; reruns the page once it has finished."""
    _panel(key)


@st.fragment(run_every=STREAM_REFRESH_S)
def streaming_panel(key: JobKey[Any]) -> None:
    """Progress of a job that writes as it goes (a generation), refreshed more often."""
    _panel(key)


@st.fragment(run_every=1.0)
def waiting_note(key: JobKey[Any], text: str) -> None:
    """One line while background work for ``key`` runs; the page is drawn again once it ends."""
    if _running(key) is not None:
        st.caption(md(text))


def _running(key: JobKey[Any]) -> Job[Any] | None:
    """The job still computing ``key``; once it has ended, the page is drawn again."""
    job = server.current().pool.get(key)
    if job is None or job.future is None or job.future.done():
        st.rerun(scope="app")
    return job


def _panel(key: JobKey[Any]) -> None:
    job = _running(key)
    if job is None:
        return
    fraction, text = _status(job)
    left, right = st.columns([6, 1])
    left.progress(fraction, text=text)
    if right.button(
        "Cancel",
        key=_button_key("cancel", key),
        help="Stop this work; the page keeps what it showed before.",
    ):
        server.current().pool.cancel(job, session_id())
        keep(Session.CANCELLED, st.session_state.get(Session.CANCELLED, frozenset()) | {key})
        st.rerun(scope="app")
    if job.partial is not None and job.partial.text:
        st.code(job.partial.text, language=None, wrap_lines=True)  # shown as text, escaped
