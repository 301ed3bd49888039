"""AppTest: the scaling page renders for the bundled model and MiniLM, and handles bad input.

AppTest drops the sidebar's widgets from the tree after ``switch_page`` (their values are not
carried to the next rerun), so each case opens the app, sets its state, then switches once.
"""

from __future__ import annotations

import re

from models.head import Head
from tests.app.helpers import open_app, open_page, texts
from ui.keys import Scaling, Session, Sidebar
from ui.runtime import server
from ui.runtime.job_keys import LogitsKey, LossSweepKey
from ui.sections.scaling import MAX_TOKENS
from ui.state.scaling import ScalingView

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
        "bundled",
        **{Scaling.VIEW: ScalingView(points=9, low=1 / 8, high=8.0), Sidebar.PROMPT: prompt},
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
    assert not any(isinstance(k, LossSweepKey) for k in at.session_state[Session.ASKED])


def test_page_runs_for_minilm_and_says_there_is_no_loss():
    at = open_scaling("minilm", **{Scaling.VIEW: ScalingView(axis="alpha", head=Head(2, 3))})
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
        **{Scaling.VIEW: ScalingView(pick=0, head=Head(1, 0), low=1 / 8, high=8.0, points=9)},
    )
    press(at, Scaling.START, "bundled")
    said = texts(press(at, Scaling.LOSS, "bundled"))
    assert "hook_attn_scores" in said and "Loss at the model's own scale" in said
    assert at.select_slider(key=Scaling.PICK).value == 0
    assert len(at.get("plotly_chart")) == 6
    headings = [h.value for h in at.subheader]  # each heatmap is named above it, not below
    assert "Head 1.0 at the point picked, c = 1/8" in headings
    assert "Head 1.0 at both ends of the sweep and the point picked" in headings


def test_switching_to_alpha_keeps_the_point_at_the_models_own_scale():
    at = open_scaling(
        "bundled", **{Scaling.VIEW: ScalingView(points=9, low=1 / 8, high=8.0, pick=1)}
    )
    assert at.select_slider(key=Scaling.PICK).value == 1
    at.radio(key=Scaling.AXIS).set_value(ALPHA)
    at.session_state[Sidebar.SOURCE] = "bundled"
    at.run()
    assert not at.exception
    assert at.select_slider(key=Scaling.PICK).value == 4  # alpha = 0.5 of 9 points, not alpha 0
    assert at.session_state[Scaling.VIEW] == ScalingView(
        axis="alpha", points=9, low=1 / 8, high=8.0
    )
    link = next(str(md.value) for md in at.markdown if "Link to this view" in str(md.value))
    assert "sweep=alpha" in link and "points=9" in link and "lo=0.125" in link


def test_a_link_opens_the_sweep_it_names():
    query = {"sweep": "factor", "lo": "0.25", "hi": "4", "points": "7", "layer": "1"}
    query |= {"head": "1", "at": "5", "sseed": "3", "prompt": "a prompt only this link sweeps"}
    at = open_app("pages/scaling.py", model="bundled", **query)
    assert not at.exception
    view = ScalingView(points=7, low=1 / 4, high=4.0, head=Head(1, 1), pick=5, seed=3)
    assert at.session_state[Scaling.VIEW] == view
    assert at.select_slider(key=Scaling.PICK).value == 5
    assert at.selectbox(key=Scaling.HEAD).value == Head(1, 1)
    assert at.number_input(key=Scaling.SEED).value == 3
    key = LogitsKey(at.session_state[Session.GOOD_MODEL], query["prompt"], MAX_TOKENS)
    assert server.current().pool.get(key) is None  # a link sweeps nothing until asked
