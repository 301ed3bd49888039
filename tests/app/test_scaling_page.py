"""AppTest: the scaling page renders for the bundled model and MiniLM, and handles bad input.

AppTest drops the sidebar's widgets from the tree after ``switch_page`` (their values are not
carried to the next rerun), so each case opens the app, sets its state, then switches once.
"""

from __future__ import annotations

import re

from models.head import Head
from tests.app.helpers import open_page, texts
from ui.keys import Scaling, Session, Sidebar
from ui.runtime import server
from ui.runtime.job_keys import LogitsKey, LossSweepKey
from ui.sections.scaling import MAX_TOKENS

PAGE = "pages/scaling.py"
ALPHA = "alpha"


def open_scaling(model: str, **state):
    at = open_page(PAGE, model, **state)
    assert not at.exception
    return at


def press(at, key: str, source: str):
    """Press a button (the sidebar's model is set again: AppTest drops it after a switch);
    a button the page does not show (its work has finished before: kept) is left alone."""
    if not any(button.key == key for button in at.button):
        return at
    at.button(key=key).click()
    at.session_state[Sidebar.SOURCE] = source
    at.run()
    assert not at.exception
    return at


def test_arrival_runs_nothing_and_says_what_the_sweep_will_take():
    prompt = "a prompt no other test sweeps: nothing of it is kept"
    at = open_scaling(
        "bundled", **{Scaling.POINTS: 9, Scaling.RANGE: (1 / 8, 8.0), Sidebar.PROMPT: prompt}
    )
    key = LogitsKey(
        at.session_state[Session.GOOD_MODEL], at.session_state[Sidebar.PROMPT], MAX_TOKENS
    )
    assert server.current().pool.get(key) is None  # no pass over the prompt was started
    assert len(at.get("plotly_chart")) == 2  # only the synthetic check's figures
    label = at.button(key=Scaling.START).label
    assert re.fullmatch(r"Sweep the model's logits \(9 points, about \d+ (s|min)\)", label)
    press(at, Scaling.START, "bundled")
    assert len(at.get("plotly_chart")) == 5  # saturation, heatmap, extremes, synthetic x2
    loss = at.button(key=Scaling.LOSS).label
    assert re.fullmatch(r"Run the model at all 9 points \(9 forward passes, about \d+ s\)", loss)
    assert not any(isinstance(k, LossSweepKey) for k in at.session_state[Scaling.ASKED])


def test_page_runs_for_minilm_and_says_there_is_no_loss():
    at = open_scaling("minilm", **{Scaling.AXIS: "alpha", Scaling.HEAD: Head(2, 3)})
    said = texts(press(at, Scaling.START, "minilm"))
    assert "bidirectional encoder" in said and "hook_q/hook_k" in said
    assert "20,000 independent (q, k) pairs" in said
    assert at.radio(key=Scaling.AXIS).value == ALPHA
    assert at.select_slider(key=Scaling.PICK).value == 12  # alpha = 0.5 of 25 points
    frame = at.dataframe[0].value
    assert (frame["Var(q·k) / d_k"] - 1).abs().max() < 0.05
    assert len(at.get("plotly_chart")) == 5


def test_empty_prompt_gives_a_message():
    at = open_scaling("minilm", **{Sidebar.PROMPT: "   "})
    assert "prompt is empty" in texts(at)
    assert len(at.get("plotly_chart")) == 2  # the synthetic panel still shows


def test_page_runs_for_bundled_with_loss_sweep():
    at = open_scaling(
        "bundled",
        **{
            Scaling.PICK: 0,
            Scaling.HEAD: Head(1, 0),
            Scaling.RANGE: (1 / 8, 8.0),
            Scaling.POINTS: 9,
        },
    )
    press(at, Scaling.START, "bundled")
    said = texts(press(at, Scaling.LOSS, "bundled"))
    assert "hook_attn_scores" in said and "Loss at the model's own scale" in said
    assert at.select_slider(key=Scaling.PICK).value == 0
    assert len(at.get("plotly_chart")) == 6


def test_switching_to_alpha_keeps_the_point_at_the_models_own_scale():
    at = open_scaling(
        "bundled", **{Scaling.POINTS: 9, Scaling.RANGE: (1 / 8, 8.0), Scaling.PICK: 1}
    )
    assert at.select_slider(key=Scaling.PICK).value == 1
    at.radio(key=Scaling.AXIS).set_value(ALPHA)
    at.session_state[Sidebar.SOURCE] = "bundled"
    at.run()
    assert not at.exception
    assert at.select_slider(key=Scaling.PICK).value == 4  # alpha = 0.5 of 9 points, not alpha 0
