"""The Circuits page's state in the session, the keys of its jobs, and what the task hands on to
the sections that patch (layout helpers only; the state's rules are in ui.state.circuits)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import streamlit as st

from models.circuits import Baseline, CircuitTask, Setup
from models.circuits.presets import presets
from models.errors import UserError
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Circuits
from ui.runtime import server
from ui.runtime.job_keys import AttributionKey, CircuitKey, PathKey, PresetsKey, WeightsKey
from ui.runtime.store import JobKey
from ui.session_state import keep
from ui.state import circuits as cs
from ui.state.circuits import AtPOptions, CircuitsState, PathRequest
from ui.text import md
from ui.widgets import components

R = TypeVar("R")

TAB_LABELS: dict[cs.Tab, str] = {
    "patching": "Patching and direct attribution",
    "atp": "Attribution patching (AtP*)",
    "paths": "Paths and the circuit graph",
    "weights": "What the weights say",
}


@dataclass(frozen=True)
class Ready:
    """A checked task with its clean and corrupted runs: what the patching sections need."""

    task: CircuitTask
    setup: Setup
    key: CircuitKey
    base: Baseline


def preset_tasks(model: ModelHandle) -> dict[str, CircuitTask]:
    """The model's ready-made tasks (none for an encoder, or when none can be drawn)."""
    if not model.facts.causal:
        return {}
    spec = session.allowed_spec(model)
    try:
        return server.current().derived.get_or_compute(PresetsKey(spec), lambda: presets(model))
    except UserError as err:
        session.show_error(err)
        return {}


def current_state(model: ModelHandle) -> CircuitsState:
    """The session's state for ``model`` (a new model starts from its first preset)."""
    state = stored()
    spec = session.allowed_spec(model)
    if state.model != spec:
        state = cs.for_model(state, spec, preset_tasks(model))
        save(state)
    return state


def stored() -> CircuitsState:
    """The session's state, or the one its link asked for (its notes shown once)."""
    found = st.session_state.get(Circuits.STATE)
    if isinstance(found, CircuitsState):
        return found
    for note in session.link_notes("circuits"):
        st.info(md(note))
    state = session.opened_with().circuits
    save(state)
    return state


def save(state: CircuitsState) -> None:
    keep(Circuits.STATE, state)


def apply(change: Callable[..., CircuitsState], *args: Any, **kwargs: Any) -> None:
    """A callback: replace the stored state by ``change(state, *args, **kwargs)``."""
    save(change(stored(), *args, **kwargs))


def bound(
    key: str, value: Any, change: Callable[[CircuitsState, Any], CircuitsState]
) -> dict[str, Any]:
    """:func:`ui.session.bound` on the page's state."""
    return session.bound(Circuits.STATE, key, value, change)


def tabs(state: CircuitsState) -> dict[cs.Tab, Any]:
    """The page's tabs (only the open one runs), the open one kept in the state."""
    labels = list(TAB_LABELS.values())
    by_label = {label: tab for tab, label in TAB_LABELS.items()}
    made = st.tabs(
        labels,
        **bound(
            Circuits.TAB, TAB_LABELS[state.tab], lambda s, label: cs.choose_tab(s, by_label[label])
        ),
    )
    return dict(zip(TAB_LABELS, made, strict=True))


def sync_link() -> None:
    """The page's state in the address bar, so a copied link opens this task and these
    choices."""
    state = stored()
    components.sync_url(session.page_query(state, prompt=None), key=Circuits.URL)


def atp_key(ready: Ready, options: AtPOptions) -> AttributionKey:
    return AttributionKey(
        ready.key, options.qk_fix, options.grad_drop, options.verify_top, options.edges
    )


def path_key(ready: Ready, request: PathRequest) -> PathKey:
    return PathKey(ready.key, request.receiver, request.input, request.mlps)


def weights_key(model: ModelHandle) -> WeightsKey:
    return WeightsKey(session.allowed_spec(model))


def finished(key: JobKey[R]) -> R | None:
    """A finished result for ``key`` (in memory or kept on disk), without starting anything."""
    return server.current().pool.finished(key)
