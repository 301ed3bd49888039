"""The explorer's view in the session: read it, replace it, and fit it to a run.

Widget callbacks change the view through :func:`update`, which applies a pure transition from
:mod:`ui.state.explorer` to the stored :class:`ExplorerView`.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from models.capture.run import AttentionRun
from models.capture.views import strongest_key
from models.head import Head
from ui import session
from ui.keys import Session
from ui.runtime import server
from ui.runtime.job_keys import RunKey
from ui.session_state import keep
from ui.state import explorer as state
from ui.state.explorer import ExplorerView, RunShape
from ui.text import md


def shape_of(run: AttentionRun, key: RunKey) -> RunShape:
    heads = run.layer_heads
    uneven = len(set(heads)) > 1
    return RunShape(run.facts.n_layers, run.grid_heads, run.n_tokens, key, heads if uneven else ())


def strongest(run: AttentionRun) -> state.Strongest:
    return lambda head, token: strongest_key(run, head.layer, head.index, token, skip_first=True)


def current_view() -> ExplorerView:
    """The session's view, or the one its link asked for."""
    return session.stored_view(Session.EXPLORER, "explorer", ExplorerView)


def save(view: ExplorerView) -> None:
    keep(Session.EXPLORER, view)


def seed(run: AttentionRun, key: RunKey) -> ExplorerView:
    """The view for this run (a new prompt opens on its last token), notes shown once."""
    first = Session.EXPLORER not in st.session_state
    view, notes = state.for_run(current_view(), shape_of(run, key), strongest(run))
    if first:
        for note in notes + session.link_notes("explorer"):
            st.info(md(note))
    save(view)
    return view


def update(
    run_key: RunKey, change: Callable[[ExplorerView, RunShape, AttentionRun], ExplorerView]
) -> None:
    """A widget callback: apply ``change`` to the stored view (when the run is at hand)."""
    run = server.current().results.get(run_key)
    if run is not None:
        save(change(current_view(), shape_of(run, run_key), run))


def compare_link(prompt_a: str, prompt_b: str, head: Head | None = None) -> str:
    """Relative URL that opens the explorer comparing ``prompt_a`` (the sidebar's prompt) with
    ``prompt_b``, on ``head`` when given."""
    view = ExplorerView(head=head or Head(0, 0), mode="compare", prompt_b=prompt_b)
    return session.page_url(view, prompt_a)
