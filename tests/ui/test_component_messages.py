"""Messages from the browser components are checked where they enter: a message of the wrong
type or shape (anything can be sent over the websocket) is dropped, and no page callback
raises on it. Before, 15 such messages raised in the sender's page (``Head.parse``'s
ValueError, ``int('abc')``, a span or window without its ``stop`` or ``q1``)."""

from __future__ import annotations

import pytest
import streamlit as st

from models.capture.run import capture
from models.head import Head
from models.model.spec import ModelSpec
from ui.keys import Explorer, Generate, Session
from ui.runtime import server
from ui.runtime.job_keys import RunKey
from ui.runtime.policy import admit
from ui.runtime.settings import Settings
from ui.sections import explorer, explorer_compare, explorer_detail, explorer_strip, generate_steps
from ui.state.explorer import ExplorerView, RunShape
from ui.state.generate import GenerateState
from ui.widgets import components
from ui.widgets.component_messages import checked, head_id, position

WRONG_HEADS = ["-1.x", "abc", 5, 1.5, ["1.2"], {"id": "1.2"}, "1.2.3", "", "1 .2", True]
WRONG_POSITIONS = ["abc", "3", 1.5, -1, True, [2], {"p": 2}, 2**60, float("nan")]
WRONG_SPANS = [
    {"start": 1},
    {"stop": 3},
    {"start": "a", "stop": 2},
    "x",
    [1, 3],
    {"start": -1, "stop": 2},
]
WRONG_WINDOWS = [{"q0": 1}, {"q0": "a", "q1": 2, "k0": 0, "k1": 1}, [0, 1, 0, 1], "0,1,0,1"]


def test_each_check_keeps_only_its_shape():
    assert [head_id(v) for v in WRONG_HEADS] == [None] * len(WRONG_HEADS)
    assert head_id(" 2.3 ") == "2.3"
    assert [position(v) for v in WRONG_POSITIONS] == [None] * len(WRONG_POSITIONS)
    assert position(0) == 0 and position(4095) == 4095
    span = {"start": 2, "stop": 5, "extra": "<b>"}
    assert checked("token_strip", "span", span) == {"start": 2, "stop": 5}
    assert [checked("token_strip", "span", v) for v in WRONG_SPANS] == [None] * len(WRONG_SPANS)
    window = {"q0": 1, "q1": 9, "k0": 0, "k1": 7, "at": 1.7e12}
    assert checked("overview", "picked", window) == {"q0": 1, "q1": 9, "k0": 0, "k1": 7}
    assert checked("heatmap", "clicked", {"query": 3, "key": 1}) == {"query": 3, "key": 1}
    assert checked("head_grid", "clicked", 3) is None  # a position sent to the head grid
    assert checked("token_strip", "clicked", "1.2") is None  # a head sent to the token strip
    assert checked(None, "clicked", "1.2") is None  # no component drawn under that key
    assert checked("overview", "nonsense", {"q0": 1}) is None  # not a trigger it has


@pytest.fixture
def stored_run(bundled):
    """The bundled model's run of a short prompt, in the server's store, and a fresh view."""
    key = RunKey(admit(ModelSpec("bundled"), Settings()), "the cat sat on the mat", None)
    server.current().results.put(key, capture(bundled, key.prompt))
    components.head_grid(None, 4, "0.0", Explorer.GRID, lambda: None)
    components.head_grid(None, 4, "0.0", Explorer.DIVERGENCE_GRID, lambda: None)
    components.token_strip("", Explorer.TOKENS, lambda: None)
    components.overview("", 7, (0, 7), (0, 7), Explorer.OVERVIEW, lambda: None)
    components.token_strip("", Generate.OUTPUT, lambda: None)
    components.token_strip("", Generate.STRIP, lambda: None)
    st.session_state[Session.EXPLORER] = ExplorerView(head=Head(1, 1), token=3)
    st.session_state[Generate.STATE] = GenerateState(step=2)
    yield key
    for name in (Session.EXPLORER, Generate.STATE, Explorer.GRID, Explorer.DIVERGENCE_GRID):
        st.session_state.pop(name, None)
    for name in (Explorer.TOKENS, Explorer.OVERVIEW, Generate.OUTPUT, Generate.STRIP):
        st.session_state.pop(name, None)


def callbacks(key: RunKey):
    """Each component callback of the pages, by (widget key, trigger) it reads."""
    return {
        (Explorer.GRID, "clicked"): lambda: explorer.on_head_click(key),
        (Explorer.DIVERGENCE_GRID, "clicked"): lambda: explorer_compare.on_grid_click(key),
        (Explorer.TOKENS, "clicked"): lambda: explorer_strip.on_click(key, False),
        (Explorer.TOKENS, "span"): lambda: explorer_strip.on_span(key, False),
        (Explorer.OVERVIEW, "picked"): lambda: explorer_detail.on_overview_pick(
            RunShape(3, 4, 7, key)
        ),
        (Generate.OUTPUT, "clicked"): lambda: generate_steps._on_output_click(5),
        (Generate.STRIP, "clicked"): lambda: generate_steps._on_strip_click(3, 5),
    }


CASES = (
    [((Explorer.GRID, "clicked"), v) for v in WRONG_HEADS]
    + [((Explorer.DIVERGENCE_GRID, "clicked"), v) for v in ("-1.x", 7, "x.1")]
    + [((Explorer.TOKENS, "clicked"), v) for v in ("abc", [1], {"p": 1}, -4)]
    + [((Explorer.TOKENS, "span"), v) for v in WRONG_SPANS]
    + [((Explorer.OVERVIEW, "picked"), v) for v in WRONG_WINDOWS]
    + [((Generate.OUTPUT, "clicked"), v) for v in ("abc", [0], -1)]
    + [((Generate.STRIP, "clicked"), v) for v in ("abc", {"x": 1})]
)


@pytest.mark.parametrize(("sender", "raw"), CASES, ids=[f"{s[0]}.{s[1]}={v!r}" for s, v in CASES])
def test_a_malformed_message_changes_nothing_and_raises_nothing(stored_run, sender, raw):
    widget, trigger = sender
    st.session_state[widget] = {trigger: raw}
    before = st.session_state[Session.EXPLORER], st.session_state[Generate.STATE]
    callbacks(stored_run)[sender]()
    assert (st.session_state[Session.EXPLORER], st.session_state[Generate.STATE]) == before


def test_well_formed_messages_still_move_the_view(stored_run):
    run = callbacks(stored_run)
    st.session_state[Explorer.GRID] = {"clicked": "2.3"}
    run[Explorer.GRID, "clicked"]()
    assert st.session_state[Session.EXPLORER].head == Head(2, 3)
    st.session_state[Explorer.TOKENS] = {"clicked": 5}
    run[Explorer.TOKENS, "clicked"]()
    assert st.session_state[Session.EXPLORER].token == 5
    st.session_state[Explorer.TOKENS] = {"span": {"start": 1, "stop": 4}}
    run[Explorer.TOKENS, "span"]()
    assert st.session_state[Session.EXPLORER].span is not None
    st.session_state[Generate.OUTPUT] = {"clicked": 4}
    run[Generate.OUTPUT, "clicked"]()
    assert st.session_state[Generate.STATE].step == 4
