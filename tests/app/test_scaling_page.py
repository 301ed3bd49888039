"""AppTest: the scaling page renders for the bundled model and MiniLM, and handles bad input.

AppTest drops the sidebar's widgets from the tree after ``switch_page`` (their values are not
carried to the next rerun), so each case opens the app, sets its state, then switches once.
"""

from __future__ import annotations

from models.head import Head
from tests.app.helpers import open_page, texts
from ui.keys import Scaling, Sidebar

PAGE = "pages/scaling.py"
ALPHA = "alpha"


def open_scaling(model: str, **state):
    at = open_page(PAGE, model, **state)
    assert not at.exception
    return at


def test_page_runs_for_minilm_and_says_there_is_no_loss():
    at = open_scaling("minilm", **{Scaling.AXIS: "alpha", Scaling.HEAD: Head(2, 3)})
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
        **{
            Scaling.PICK: 0,
            Scaling.HEAD: Head(1, 0),
            Scaling.RANGE: (1 / 8, 8.0),
            Scaling.POINTS: 9,
        },
    )
    said = texts(at)
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
