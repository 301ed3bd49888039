"""AppTest: the Generate page on the bundled model against direct calls of the core and plain
transformers: the tokens written, the scrubber's rows, the KV cache's bytes, a link that writes
the same sampled text again, bad inputs, and a small eviction run."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from models.generate import GenerationSettings, generate
from models.generate.sweep import bundled_passage, model_passage
from models.head import Head
from models.heads.finding.corpus import default_corpus
from models.model.forward import tokenize
from models.model.spec import BUNDLED_DIR
from tests.app.helpers import (
    component_data,
    open_app,
    open_page,
    plotly_array,
    strip_weights,
    texts,
)
from ui.keys import Generate, Sidebar

TEMPERATURE_WORDS = "temperature between 0.01 and 100"

PAGE = "pages/generate.py"
PROMPT = "def add(a, b):\n"
CONFIG = json.loads((BUNDLED_DIR / "config.json").read_text())


def generated(at) -> list[int]:
    """Token ids of the steps table (what the page wrote)."""
    tables = [t.value for t in at.dataframe if "id" in t.value.columns]
    assert tables, "no steps table on the page"
    return [int(i) for i in tables[0]["id"]]


def rows_figure(at) -> np.ndarray:
    found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(Generate.ROWS_FIGURE)]
    assert found, "no step figure"
    return plotly_array(json.loads(found[0].proto.spec)["data"][0]["customdata"])


@pytest.fixture(scope="module")
def greedy():
    """The page after writing 8 greedy tokens after PROMPT on the bundled model."""
    at = open_page(PAGE, "bundled", **{Sidebar.PROMPT: PROMPT})
    at.number_input(key=Generate.MAX_NEW).set_value(8).run()
    at.button(key=Generate.GO).click().run()
    assert not at.exception
    return at


def test_greedy_tokens_equal_a_direct_generate_call(greedy, bundled):
    direct = generate(bundled, PROMPT, GenerationSettings(max_new_tokens=8))
    assert generated(greedy) == list(direct.output_ids)
    spans = component_data(greedy, "atlas_token_strip")["html"]  # the written tokens
    probs = [float(p) for p in re.findall(r"probability ([0-9.]+) ·", spans)]
    np.testing.assert_allclose(probs, [s.choice.prob for s in direct.steps], atol=5e-4)
    assert "8 tokens written" in texts(greedy)


def test_the_scrubbers_rows_equal_the_generations_rows(greedy, bundled):
    direct = generate(bundled, PROMPT, GenerationSettings(max_new_tokens=8))
    at = greedy
    at.select_slider(key=Generate.STEP).set_value(3).run()
    at.selectbox(key=Generate.HEAD).set_value(Head(1, 2)).run()
    assert not at.exception
    rows = direct.rows(3)
    np.testing.assert_allclose(rows_figure(at), rows.reshape(-1, rows.shape[-1]), atol=1e-6)
    np.testing.assert_allclose(strip_weights(at, -1), rows[1, 2], atol=1e-6)
    assert "**Step 3** wrote" in texts(at)
    explorer = re.search(r"\((\./\?[^)]*)\)", texts(at).split("Open the whole text")[1])
    assert explorer and "layer=1&head=2" in explorer.group(1)
    assert f"token={direct.n_prompt - 1 + 3}" in explorer.group(1)


def test_the_kv_figure_read_from_the_cache_equals_the_formula(greedy):
    said = texts(greedy)
    found = re.search(
        r"real cache object after this generation: \*\*([0-9,]+) bytes\*\* for "
        r"([0-9,]+) tokens",
        said,
    )
    assert found, said
    measured, tokens = (int(g.replace(",", "")) for g in found.groups())
    d_head = CONFIG["n_embd"] // CONFIG["n_head"]
    per_token = 2 * CONFIG["n_layer"] * CONFIG["n_head"] * d_head * 4  # float32, MHA
    assert tokens == len(generated(greedy)) + 9 - 1  # BOS + 8-token prompt, the last never fed
    assert measured == per_token * tokens and "they are equal" in said


def test_a_link_writes_the_same_sampled_text_again(bundled):
    link = {"n": 6, "chat": 0, "decoding": "sample", "temp": 0.9, "top_k": 0, "top_p": 1}
    at = open_app(PAGE, model="bundled", prompt=PROMPT, seed=7, **link)
    assert not at.exception
    direct = generate(
        bundled,
        PROMPT,
        GenerationSettings(max_new_tokens=6, decoding="sample", temperature=0.9, seed=7),
    )
    assert generated(at) == list(direct.output_ids)
    shared = re.search(r"\[Link to this generation\]\(([^)]*)\)", texts(at))
    assert shared and "n=6&chat=0&decoding=sample&temp=0.9" in shared.group(1)
    assert "seed=7" in shared.group(1) and "prompt=def+add" in shared.group(1)
    other = open_app(PAGE, model="bundled", prompt=PROMPT, seed=8, **link)
    assert generated(other) != generated(at)  # another seed, another text


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({Generate.MAX_NEW: 500}, "reads at most 128 tokens"),
        ({Generate.DECODING: "sample", Generate.TEMPERATURE: 0.0}, TEMPERATURE_WORDS),
        ({Generate.DECODING: "sample", Generate.TOP_P: 0.0}, "top-p must lie in (0, 1]"),
    ],
)
def test_bad_settings_get_a_message(changes, message):
    at = open_page(PAGE, "bundled", **{Sidebar.PROMPT: PROMPT})
    for key, value in changes.items():
        widget = at.radio(key=key) if key == Generate.DECODING else at.number_input(key=key)
        widget.set_value(value).run()
    at.button(key=Generate.GO).click().run()
    assert not at.exception
    assert message in texts(at) and not [t for t in at.dataframe if "id" in t.value.columns]


def test_an_empty_prompt_and_an_encoder_get_a_message():
    at = open_page(PAGE, "bundled", **{Sidebar.PROMPT: "   "})
    at.button(key=Generate.GO).click().run()
    assert not at.exception and "prompt is empty" in texts(at)
    at = open_page(PAGE, "minilm")
    assert not at.exception
    said = texts(at)
    assert "is an encoder" in said and "nothing to evict" in said


def test_full_budget_eviction_equals_plain_perplexity(bundled):
    at = open_page(PAGE, "bundled")
    at.multiselect(key=Generate.EVICT_POLICIES).set_value(["window", "sinks"]).run()
    at.multiselect(key=Generate.EVICT_BUDGETS).set_value([16, 32]).run()
    at.button(key=Generate.EVICT_RUN).click().run()
    assert not at.exception
    table = next(t.value for t in at.dataframe if "policy" in t.value.columns)
    assert list(table["budget"]) == [128, 16, 32, 16, 32]
    full = float(table["perplexity"].iloc[0])
    passage = model_passage(bundled)  # held-out Python: the bundled model's own kind of text
    assert "def " in passage and passage.startswith(default_corpus(bundled).texts[0])
    ids = tokenize(bundled, passage, 1024)[0]
    eager = AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, attn_implementation="eager").eval()
    with torch.no_grad():
        plain = float(torch.exp(eager(ids, labels=ids).loss))
    assert full == pytest.approx(plain, rel=1e-4)
    english = tokenize(bundled, bundled_passage(), 1024)[0]
    with torch.no_grad():
        assert full < float(torch.exp(eager(english, labels=english).loss)) / 4
    said = texts(at)
    assert f"experiment's own pass gives {full:.4f}" in said
    assert f"plain forward pass with labels gives {plain:.4f}" in said
    assert "without sinks vs" in said and "original positions" in said


def test_pasted_text_is_kept_and_the_cost_is_stated_before_running(bundled):
    from models.classroom.costs import human_bytes
    from models.generate.sweep import estimate
    from ui.state.generate import eviction_settings

    at = open_page(PAGE, "bundled")
    at.radio(key=Generate.EVICT_SOURCE).set_value("pasted").run()
    assert not at.exception and "Paste a text above" in texts(at)
    pasted = "total = total + value\n" * 40
    at.text_area(key=Generate.EVICT_TEXT).set_value(pasted).run()
    assert not at.exception
    state = at.session_state[Generate.STATE]
    assert state.eviction.pasted == pasted and state.sweep is None  # nothing runs unasked
    cost = estimate(bundled, 128, eviction_settings(state.eviction, 128))
    said = texts(at)
    assert "Reads 128 tokens once with the full cache, then each of 9 policy" in said
    assert f"up to {human_bytes(cost.peak_bytes)} of memory" in said


def test_generate_states_its_price_for_the_settings(bundled):
    """The Generate button names how many tokens it writes and what that costs, priced like
    every other start button (:func:`models.generate.cost.generation_estimate` for the prompt
    as the model reads it); longer outputs cost more; a prompt that leaves no room for them
    gets no price (the page says why once pressed)."""
    at = open_page(PAGE, "bundled", **{Sidebar.PROMPT: PROMPT})
    at.number_input(key=Generate.MAX_NEW).set_value(8).run()
    label = at.button(key=Generate.GO).proto.label
    assert re.fullmatch(r"Generate \(up to 8 tokens, about \d+ s\)", label), label
    n_prompt = int(tokenize(bundled, PROMPT)[0].shape[1])
    assert n_prompt + 8 <= CONFIG["n_positions"]
    at.number_input(key=Generate.MAX_NEW).set_value(100).run()
    assert "up to 100 tokens" in at.button(key=Generate.GO).proto.label
    at.number_input(key=Generate.MAX_NEW).set_value(CONFIG["n_positions"]).run()
    assert at.button(key=Generate.GO).proto.label == "Generate"  # no room after the prompt
