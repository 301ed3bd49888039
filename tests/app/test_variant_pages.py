"""Every page opens each 2025-26 attention variant (tiny random checkpoints, local folders)
without an exception; DiffLlama is refused in one line that names it."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.app.helpers import detail_heatmap, has_heatmap, open_app, texts
from tests.attention.tiny_variants import build_variants
from ui.keys import Explorer, HeadAtlas, Scaling, Sidebar

OPENED = ["gpt_oss", "gemma2", "gemma3", "qwen3", "qwen3_next", "deepseek_v3"]
PAGES = [
    "pages/heads.py",
    "pages/circuits.py",
    "pages/generate.py",
    "pages/scaling.py",
    "pages/classroom.py",
    "pages/kernel.py",
    "pages/atlas.py",
]
PROMPT = "def main(args): return args.out and the model is here. The model is here again."


@pytest.fixture(scope="module")
def variant_dirs(tmp_path_factory):
    return build_variants(tmp_path_factory.mktemp("variant_pages"))


@pytest.fixture
def allowed(variant_dirs, monkeypatch):
    root = next(iter(variant_dirs.values())).parent
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", str(root))
    return variant_dirs


def opened_on(path) -> object:
    at = open_app(model="bundled", prompt=PROMPT)
    at.selectbox(key=Sidebar.SOURCE).set_value("local").run()
    at.text_input(key=Sidebar.NAME).set_value(str(path)).run()
    return at


@pytest.mark.parametrize("name", OPENED)
def test_every_page_opens_each_variant(name, allowed):
    at = opened_on(allowed[name])
    assert not at.exception, name
    assert has_heatmap(at), texts(at)[-800:]
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (name, page)
        starts = [b for b in at.button if b.key in (HeadAtlas.START, Scaling.START)]
        if starts:  # costly work starts when asked: ask, so every variant is measured
            starts[0].click()
            at.session_state[Sidebar.SOURCE] = "local"
            at.session_state[Sidebar.NAME] = str(allowed[name])
            at.run()
            assert not at.exception, (name, page, "asked")


def test_differential_attention_is_refused_in_one_line(allowed):
    at = opened_on(allowed["diffllama"])
    assert not at.exception
    said = texts(at)
    assert "DiffLlama" in said
    assert "Still showing the last model that loaded" in said


def test_a_learned_sink_is_stated_and_closes_the_row(allowed):
    """gpt-oss: the explorer says what share of the selected query's attention went to the
    head's sink, and that share plus the weights drawn for that row is 1."""
    at = opened_on(allowed["gpt_oss"])
    at.selectbox(key=Explorer.TOKEN).set_value(1).run()  # few keys: the sink weighs in
    found = re.search(
        r"this head puts ([0-9.e+-]+) of query (\d+)'s attention on its sink", texts(at)
    )
    assert found, texts(at)[-1200:]
    sink, query = float(found.group(1)), int(found.group(2))
    drawn = detail_heatmap(at)["values"][query]
    assert abs(sink + np.nansum(drawn) - 1.0) <= 1e-3  # three significant digits shown
    assert query == 1 and 0.01 < sink < 1.0


def test_a_linear_layer_says_it_is_not_a_softmax(allowed):
    at = opened_on(allowed["qwen3_next"])
    assert not at.exception
    assert "linear attention (Gated DeltaNet), not a softmax" in texts(at).replace("\n", " ")
