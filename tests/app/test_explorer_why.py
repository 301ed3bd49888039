"""The explorer's Why here? panel, run headless, against plain ``transformers``."""

from __future__ import annotations

import re

import pytest

from models.model.forward import tokenize
from models.model.spec import BUNDLED_DIR
from tests.app.helpers import detail_heatmap, open_app, texts
from tests.circuits.conftest import reference
from ui.keys import Explorer
from ui.sections.explorer_why import Cell, clicked_cell

PROMPT = "the cat sat on the mat and the cat sat on the"
LAYER, HEAD, QUERY, KEY = 1, 2, 10, 3


def shown_number(said: str, label: str) -> float:
    found = re.search(re.escape(label) + r"\s*([-+]?\d+\.\d+)", said)
    assert found, f"{label!r} not on the page"
    return float(found.group(1))


@pytest.fixture(scope="module")
def expected(bundled):
    """The logit and weight of the cell from a plain Hugging Face GPT-2 and its attention."""
    ids, _ = tokenize(bundled, PROMPT)
    ref = reference(BUNDLED_DIR, "gpt2")
    records = ref.run(ids)
    raw = ref.raw(records, LAYER, HEAD)
    weight = records[LAYER]["weights"][0, HEAD, QUERY, KEY]
    return float(raw[QUERY, KEY]), float(weight)


def asked(key: int = KEY):
    at = open_app(model="bundled", prompt=PROMPT, layer=LAYER, head=HEAD, token=QUERY)
    at.number_input(key=Explorer.WHY_KEY).set_value(key).run()
    at.button(key=Explorer.WHY_START).click().run()
    return at


def test_why_here_shows_the_models_own_score_and_the_pairs_adding_up(expected):
    at = asked()
    assert not at.exception
    said = texts(at)
    score, weight = expected
    bound = 1e-4 + 1e-5 * abs(score)  # four decimals shown, float32 rounding
    assert abs(shown_number(said, "Score (before the softmax):") - score) <= bound
    assert abs(shown_number(said, "Weight on this key:") - weight) <= 1e-4
    pairs = shown_number(said, "Sum of the pairs:")
    assert abs(pairs - score) <= bound
    assert "at the key ×" in said and "at the query:" in said  # the top pairs, in words
    assert len(at.get("plotly_chart")) >= 2  # the pairs matrix and each side's bars


def test_a_part_head_opens_in_the_explorer():
    at = asked()
    opened = [b for b in at.button if str(b.key).startswith(Explorer.why_open(""))]
    assert opened, "no head among the shown parts of a layer-1 head"
    name = str(opened[0].key).rsplit("_", 1)[1]
    opened[0].click().run()
    assert not at.exception
    assert f"Head {name}" in texts(at)


def test_a_key_the_query_never_sees_is_a_message_not_a_traceback():
    at = asked(key=QUERY + 1)  # causal: a later key has no weight
    assert not at.exception
    assert "never sees key" in texts(at)


def test_the_heatmap_cells_click_only_in_the_token_view():
    at = open_app(model="bundled", prompt=PROMPT, layer=LAYER, head=HEAD, token=QUERY)
    assert detail_heatmap(at)["clickable"] is True
    at.toggle(key=Explorer.WORDS).set_value(True).run()
    assert not at.exception
    assert detail_heatmap(at)["clickable"] is False
    assert "turn the word view off" in texts(at)


def test_a_click_names_the_cell_under_it_pinned_columns_included():
    rows, keys = range(40, 50), [0, 7, 30, 31, 32]  # two pinned sinks, then keys 30-32
    assert clicked_cell({"query": 2, "key": 0}, rows, keys) == Cell(42, 0)
    assert clicked_cell({"query": 0, "key": 3}, rows, keys) == Cell(40, 31)
    for bad in ({"query": 10, "key": 0}, {"query": 0, "key": 5}, {"query": "x"}, None, [1, 2]):
        assert clicked_cell(bad, rows, keys) is None
