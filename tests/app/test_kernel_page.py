"""AppTest: the kernel page on MiniLM (and the bundled model), bad input, unsupported models."""

from __future__ import annotations

import json

import pytest
import torch

from models.head import Head
from models.model.spec import BUNDLED_DIR
from tests.app.helpers import open_page, texts
from ui.keys import Kernel, Sidebar
from ui.state.kernel import KernelView

PAGE = "pages/kernel.py"
P_ERR, O_ERR = "max |P_kernel - P_model|", "max |O_kernel - z_model|"


def open_kernel(model: str, **state):
    at = open_page(PAGE, model, **state)
    assert not at.exception
    return at


def chart_titles(at) -> list[str]:
    return [
        json.loads(chart.proto.spec)["layout"]["title"]["text"] for chart in at.get("plotly_chart")
    ]


def test_minilm_page_shows_errors_backend_and_timings():
    at = open_kernel("minilm")
    said = texts(at)
    assert "torch-tiled" in said and "float32" in said and "CPU (" in said
    if not torch.cuda.is_available():
        assert "needs a CUDA GPU" in said and "offered when the server has a CUDA GPU" in said
    heads = at.dataframe[0].value
    assert len(heads) == 72 and list(heads.columns) == ["head", P_ERR, O_ERR]
    assert heads[P_ERR].max() <= 1e-5 and heads[O_ERR].max() <= 1e-5
    worst = heads.loc[heads[P_ERR].idxmax(), "head"]
    assert at.selectbox(key=Kernel.HEAD).value == Head.parse(worst)  # starts on the worst head
    timing = at.dataframe[1].value
    assert list(timing["implementation"]) == [
        "app kernel (torch-tiled)",
        "PyTorch SDPA",
        "naive attention (full pattern)",
    ]
    assert (timing["median ms"] > 0).all() and timing["device"].str.startswith("CPU").all()
    assert [m.value for m in at.metric][2] == "yes"
    titles = chart_titles(at)
    assert len(titles) == 3 and titles[2] == f"Head {worst}"


def test_picking_a_head_redraws_the_comparison():
    # AppTest forgets the sidebar's widgets on a rerun after switch_page, so the head is set
    # before switching (as a click on the table or the select box would set it).
    at = open_kernel("minilm", **{Kernel.VIEW: KernelView(head=Head(5, 11))})
    assert at.selectbox(key=Kernel.HEAD).value == Head(5, 11)
    assert chart_titles(at)[2] == "Head 5.11"
    assert any("layer=5&head=11" in str(md.value) for md in at.markdown)
    at.selectbox(key=Kernel.HEAD).set_value(Head(2, 3)).run()
    assert at.session_state[Kernel.VIEW] == KernelView(head=Head(2, 3))
    assert chart_titles(at)[2] == "Head 2.3"
    link = next(str(md.value) for md in at.markdown if "Link to this view" in str(md.value))
    assert "kdtype=float32" in link and "layer=2&head=3" in link


def test_empty_prompt_gives_a_message():
    at = open_kernel("minilm", **{Sidebar.PROMPT: "  "})
    assert "prompt is empty" in texts(at) and not at.get("plotly_chart")


def test_unsupported_model_is_explained_not_shown(monkeypatch):
    import models.attention.inputs as ki

    monkeypatch.setattr(ki, "layer_scales", lambda model: ((1.0,) * 6, "a wrong scale"))
    at = open_kernel("minilm", **{Sidebar.PROMPT: "A prompt that only this test runs."})
    said = texts(at)
    assert "not available for this model" in said and "a wrong scale" in said
    assert not at.dataframe and not at.get("plotly_chart")


@pytest.mark.skipif(
    not (BUNDLED_DIR / "model.safetensors").exists(),
    reason="models/bundled/model.safetensors is not trained yet",
)
def test_bundled_page_runs():
    at = open_kernel("bundled")
    heads = at.dataframe[0].value
    assert heads[P_ERR].max() <= 1e-5 and heads[O_ERR].max() <= 1e-5
    assert "causal" in texts(at)
