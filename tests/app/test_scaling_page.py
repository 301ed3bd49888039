"""AppTest: the scaling page renders for the bundled model and MiniLM, and handles bad input.

AppTest drops the sidebar's widgets from the tree after ``switch_page`` (their values are not
carried to the next rerun), so each case opens the app, sets its state, then switches once.
"""

from __future__ import annotations

from models.head import Head
from tests.app.helpers import open_app, open_page, texts
from ui.keys import Scaling, Sidebar
from ui.state.scaling import ScalingView

PAGE = "pages/scaling.py"
ALPHA = "alpha"


def open_scaling(model: str, **state):
    at = open_page(PAGE, model, **state)
    assert not at.exception
    return at


def test_page_runs_for_minilm_and_says_there_is_no_loss():
    at = open_scaling("minilm", **{Scaling.VIEW: ScalingView(axis="alpha", head=Head(2, 3))})
    said = texts(at)
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
    said = texts(at)
    assert "hook_attn_scores" in said and "Loss at the model's own scale" in said
    assert at.select_slider(key=Scaling.PICK).value == 0
    assert len(at.get("plotly_chart")) == 6


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
    query |= {"head": "1", "at": "5", "loss": "0", "sseed": "3"}
    at = open_app("pages/scaling.py", model="bundled", **query)
    assert not at.exception
    view = ScalingView(points=7, low=1 / 4, high=4.0, head=Head(1, 1), pick=5, loss=False, seed=3)
    assert at.session_state[Scaling.VIEW] == view
    assert at.select_slider(key=Scaling.PICK).value == 5
    assert at.selectbox(key=Scaling.HEAD).value == Head(1, 1)
    assert at.number_input(key=Scaling.SEED).value == 3
    assert "Loss at the model's own scale" not in texts(at)  # the loss sweep is off
