"""The page side of :mod:`ui.jobs`: start heavy work, show its place, progress, time left and a
Cancel button, and pick the result up when it is done.

Work that finishes within ``ATLAS_JOB_WAIT_S`` seconds (default 1) is simply waited for, so a
small model's page draws in one run; so is light work (expected under three seconds) for up to
:data:`LIGHT_WAIT_S` seconds on a busy server, under a spinner. Anything longer leaves a progress
panel (a fragment that polls once a second) and the page carries on with what it had before.
"""

from __future__ import annotations

import os
from concurrent.futures import CancelledError, TimeoutError as FutureTimeout
from typing import Any, Hashable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from models.progress import Cancelled
from ui.jobs import POOL, Job, Work
from ui.text import md

WAIT_S = float(os.environ.get("ATLAS_JOB_WAIT_S", "1.0"))
LIGHT_WAIT_S = 15.0
MISSING = object()
K_CANCELLED = "atlas_cancelled_jobs"


def session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


def session_alive(sid: str) -> bool:
    """Whether the browser session ``sid`` is still connected (True outside a server)."""
    from streamlit.runtime import Runtime

    if not sid or not Runtime.exists():
        return True
    return Runtime.instance().is_active_session(sid)


POOL.alive = session_alive


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "time left unknown"
    if seconds < 60:
        return f"about {max(1, round(seconds))} s left"
    return f"about {seconds / 60:.0f} min left"


def run_job(key: Hashable, label: str, work: Work, *, estimate_s: float | None = None,
            cost: tuple[str, float] | None = None, wait_s: float | None = None) -> Any:
    """The result of ``work`` for ``key``, or :data:`MISSING` while it is still running.

    Raises whatever the work raised (a :class:`models.errors.UserError` for the page to show);
    a job cancelled by another means raises :class:`models.progress.Cancelled`. After this
    session presses Cancel, the key is not started again until the visitor asks.
    """
    found = POOL.results.get(key)
    if found is not None:
        return found
    cancelled = st.session_state.setdefault(K_CANCELLED, set())
    if key in cancelled:
        st.info(f"Stopped: {md(label)}. Change a setting to run something else, or start it again.")
        if st.button("Start it again", key=f"restart_{abs(hash(key))}"):
            cancelled.discard(key)
            st.rerun()
        return MISSING
    job = POOL.submit(key, label, work, estimate_s, waiter=session_id(), cost=cost)
    try:
        return _result(job, label, WAIT_S if wait_s is None else wait_s)
    except FutureTimeout:
        pass
    except CancelledError as err:
        raise Cancelled(f"Stopped: {label}.") from err
    progress_panel(key)
    return MISSING


def _result(job: Job, label: str, wait_s: float) -> Any:
    """The job's result within ``wait_s`` seconds; light work, slowed by a busy server, gets up to
    :data:`LIGHT_WAIT_S` more under a spinner, so the page still draws in one run.

    Raises:
        concurrent.futures.TimeoutError: still running.
    """
    try:
        return job.future.result(timeout=wait_s)
    except FutureTimeout:
        if not job.light:
            raise
    with st.spinner(f"{md(label)} (the server is busy)…"):
        return job.future.result(timeout=LIGHT_WAIT_S)


def _status(job: Job) -> tuple[float, str]:
    ahead = POOL.ahead(job)
    if ahead:
        return 0.0, (f"{md(job.label)}: waiting, {ahead} heavy job{'s' if ahead > 1 else ''} ahead "
                     f"(one runs at a time on this server); then {duration(job.estimate_s)}")
    return job.fraction, f"{md(job.label)}: {md(job.text)} · {duration(job.seconds_left())}"


@st.fragment(run_every=1.0)
def progress_panel(key: Hashable) -> None:
    """Progress of the job computing ``key``; reruns the page once it has finished."""
    job = POOL.get(key)
    if job is None or job.future is None or job.future.done():
        st.rerun(scope="app")
    fraction, text = _status(job)
    left, right = st.columns([6, 1])
    left.progress(fraction, text=text)
    if right.button("Cancel", key=f"cancel_{abs(hash(key))}", help="Stop this work; the page "
                    "keeps what it showed before."):
        POOL.cancel(job, session_id())
        st.session_state.setdefault(K_CANCELLED, set()).add(key)
        st.rerun(scope="app")
