"""The explorer's view in the session: read it, replace it, and fit it to a run.

Widget callbacks change the view through :func:`update`, which applies a pure transition from
:mod:`ui.state.explorer` to the stored :class:`ExplorerView`.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

import streamlit as st

from models.capture.run import AttentionRun
from models.capture.views import strongest_key
from models.head import Head
from models.model.forward import MAX_PROMPT_CHARS
from ui import session
from ui.keys import Session
from ui.runtime import server
from ui.runtime.job_keys import RunKey
from ui.state import explorer as state
from ui.state.explorer import ExplorerView, RunShape
from ui.text import md
from ui.widgets import job_view
from viz.view_state import ViewState, to_query


def shape_of(run: AttentionRun, key: RunKey) -> RunShape:
    return RunShape(run.facts.n_layers, run.facts.n_heads, run.n_tokens, run_id=key)


def strongest(run: AttentionRun) -> state.Strongest:
    return lambda head, token: strongest_key(run, head.layer, head.index, token, skip_first=True)


def current_view() -> ExplorerView:
    """The session's view, or the one its link asked for (prompt B from the link's text, or
    from the server's prompt store when the link carries its id)."""
    found = st.session_state.get(Session.EXPLORER)
    if isinstance(found, ExplorerView):
        return found
    link = session.link_state()
    prompt_b = link.prompt_b
    if prompt_b is None and link.prompt_b_id is not None:
        prompt_b = server.current().prompts.load(link.prompt_b_id)
    return ExplorerView(
        head=Head(link.layer, link.head),
        token=link.token,
        mode=link.mode,
        prompt_b=prompt_b or "",
        words=link.words,
    )


def link_b_missing() -> list[str]:
    """A note when the link named a stored prompt B that this server does not hold."""
    link = session.link_state()
    if link.prompt_b is not None or link.prompt_b_id is None:
        return []
    if server.current().prompts.load(link.prompt_b_id) is not None:
        return []
    return [
        f"This link points to a stored prompt B (id {link.prompt_b_id[:16]}) that this "
        "server does not hold: it may come from another server or have expired. Type "
        "prompt B below to compare."
    ]


def save(view: ExplorerView) -> None:
    st.session_state[Session.EXPLORER] = view


def seed(run: AttentionRun, key: RunKey) -> ExplorerView:
    """The view for this run (a new prompt opens on its last token), notes shown once."""
    first = Session.EXPLORER not in st.session_state
    view, notes = state.for_run(current_view(), shape_of(run, key), strongest(run))
    if first:
        for note in notes + session.link_notes() + link_b_missing():
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


def shared(text: str, limit: int) -> tuple[str | None, str | None]:
    """A prompt for a link: its text when at most ``limit`` characters, else its stored id."""
    if len(text) <= limit or not text.strip():
        return text, None
    if len(text) > MAX_PROMPT_CHARS:
        return None, None
    return None, server.current().prompts.save(text, job_view.session_id())


def view_query(
    view: ExplorerView, prompt_a: str, limit: int = session.MAX_LINK_PROMPT
) -> dict[str, str]:
    """The link of ``view`` on prompt A (with prompt B in compare mode). Prompts over ``limit``
    characters travel as the ids the server keeps them under."""
    good = st.session_state.get(Session.GOOD_MODEL)
    a, a_id = shared(prompt_a, limit)
    b, b_id = shared(view.prompt_b, limit) if view.mode == "compare" else (None, None)
    return to_query(
        ViewState(
            model=good.name if good else None,
            prompt=a,
            prompt_id=a_id,
            layer=view.head.layer,
            head=view.head.index,
            token=view.token,
            mode=view.mode,
            prompt_b=b,
            prompt_b_id=b_id,
            words=view.words,
        )
    )


def compare_link(prompt_a: str, prompt_b: str, head: Head | None = None) -> str:
    """Relative URL that opens the explorer comparing ``prompt_a`` (the sidebar's prompt) with
    ``prompt_b``, on ``head`` when given."""
    view = ExplorerView(head=head or Head(0, 0), mode="compare", prompt_b=prompt_b)
    return "./?" + urlencode(view_query(view, prompt_a))
