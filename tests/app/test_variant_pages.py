"""Every page opens each 2025-26 attention variant (tiny random checkpoints, local folders)
without an exception; DiffLlama is refused in one line that names it."""

from __future__ import annotations

import pytest

from tests.app.helpers import has_heatmap, open_app, texts
from tests.attention.tiny_variants import build_variants
from ui.keys import Sidebar

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


def test_differential_attention_is_refused_in_one_line(allowed):
    at = opened_on(allowed["diffllama"])
    assert not at.exception
    said = texts(at)
    assert "DiffLlama" in said
    assert "Still showing the last model that loaded" in said
