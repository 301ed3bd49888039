"""Generation with attention rows: against transformers' own ``generate`` and HF eager attention.

References: ``AutoModelForCausalLM.generate(do_sample=False)`` for the tokens, and the eager
model's ``output_attentions`` on the whole prompt + output for every step's rows (row of step
``s`` = the query at position ``n_prompt - 1 + s``), for the bundled GPT-2 and SmolLM2 (GQA,
RoPE). The KV figure is checked against the cache object transformers itself fills.
"""

from __future__ import annotations

import threading
from dataclasses import fields, replace
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch

from models.errors import PromptError, UserError
from models.generate import GenerationError, GenerationSettings, generate
from models.generate.kv import cache_nbytes, kv_bytes_per_token
from models.generate.view import _local
from models.model.forward import tokenize
from models.progress import Cancelled

TEMPERATURE_WORDS = "temperature between 0.01 and 100"

PROMPT = "The lighthouse keeper climbed the stairs and"
N_NEW = {"bundled": 12, "smollm2": 6}


class Run(NamedTuple):
    model: Any
    result: Any
    wanted: list[int]
    patterns: np.ndarray
    cache: Any
    logits: torch.Tensor


@pytest.fixture(scope="module", params=["bundled", "smollm2"])
def run(request, eager):
    """A greedy generation (SmolLM2 through its chat template) and its eager references."""
    model = request.getfixturevalue(request.param)
    chat = request.param == "smollm2"
    result = generate(
        model, PROMPT, GenerationSettings(max_new_tokens=N_NEW[request.param], chat=chat)
    )
    hf = eager(model)
    prompt_ids = torch.tensor([result.ids[: result.n_prompt]])
    with torch.no_grad():
        wanted = hf.generate(
            prompt_ids,
            attention_mask=torch.ones_like(prompt_ids),
            do_sample=False,
            max_new_tokens=N_NEW[request.param],
        )
        out = hf(torch.tensor([result.ids]), output_attentions=True, use_cache=True)
    patterns = torch.stack(out.attentions)[:, 0].numpy()  # layer head query key
    return Run(
        model, result, wanted[0].tolist(), patterns, out.past_key_values, out.logits[0].float()
    )


def test_greedy_writes_what_transformers_generate_writes(run):
    model, result, wanted = run.model, run.result, run.wanted
    assert list(result.ids) == wanted
    assert result.stop == "length" and len(result.steps) == N_NEW[model.spec.name]


def test_every_step_row_equals_eager_attention(run):
    model, result, patterns = run.model, run.result, run.patterns
    facts = model.facts
    for step in range(len(result.steps)):
        query = result.n_prompt - 1 + step
        rows = result.rows(step)
        assert rows.shape == (facts.n_layers, facts.n_heads, query + 1)
        np.testing.assert_allclose(rows, patterns[:, :, query, : query + 1], atol=1e-5, rtol=0)
        np.testing.assert_allclose(result.sink[step], patterns[:, :, query, 0], atol=1e-5)
        np.testing.assert_allclose(
            result.prompt_share[step], patterns[:, :, query, : result.n_prompt].sum(-1), atol=1e-5
        )


def test_step_statistics_describe_the_model_distribution(run):
    result = run.result
    probs = torch.softmax(run.logits[result.n_prompt - 1 : -1], dim=-1)
    for step, p in zip(result.steps, probs, strict=True):
        choice = step.choice
        assert choice.prob == pytest.approx(float(p[choice.token_id]), abs=1e-5)
        entropy = float(-(p * torch.log(p.clamp_min(1e-30))).sum())
        assert choice.entropy == pytest.approx(entropy, abs=1e-4)
        top = torch.topk(p, 5)
        assert list(choice.top_ids) == top.indices.tolist()
        assert choice.token_id == choice.top_ids[0]  # greedy


def test_kv_figure_equals_the_real_cache(run):
    model, result, hf_cache = run.model, run.result, run.cache
    per_token = kv_bytes_per_token(model.facts, bytes_per_element=4)
    assert result.cache_tokens == len(result.ids) - 1  # the last token written is never fed
    assert result.cache_bytes == per_token * result.cache_tokens
    assert cache_nbytes(hf_cache) == per_token * len(result.ids)  # transformers' own cache


def test_explorer_text_tokenizes_back_to_the_ids(run):
    model, result = run.model, run.result
    pieces = "".join(step.text for step in result.steps)
    assert result.output_text == model.tokenizer.decode(result.output_ids) == pieces
    assert result.explorer_exact
    ids, _ = tokenize(model, result.explorer_text)
    assert ids[0].tolist() == list(result.ids)


def test_chat_template_is_shown_and_fed(run):
    model, result = run.model, run.result
    if model.spec.name == "bundled":  # run without chat: the plain prompt, no template
        assert result.templated is None
        return
    assert result.templated is not None and result.templated.startswith("<|im_start|>")
    assert PROMPT in result.templated
    fed = model.tokenizer(result.templated, add_special_tokens=False)["input_ids"]
    assert list(result.ids[: result.n_prompt]) == list(fed)


def test_sampling_is_reproducible_with_a_seed(bundled):
    def sample(seed):
        settings = GenerationSettings(
            max_new_tokens=8, decoding="sample", temperature=1.2, top_k=50, top_p=0.95, seed=seed
        )
        return generate(bundled, PROMPT, settings).ids

    first = sample(7)
    assert sample(7) == first
    assert sample(8) != first


def test_unseeded_sampling_records_the_seed_it_drew(bundled):
    settings = GenerationSettings(max_new_tokens=5, decoding="sample")
    result = generate(bundled, PROMPT, settings)
    assert result.settings.seed is not None
    assert generate(bundled, PROMPT, result.settings).ids == result.ids


def test_end_of_text_stops_the_loop(bundled, monkeypatch):
    """The loop stops after the first token the model's config names as an end of text."""
    free = generate(bundled, PROMPT, GenerationSettings(max_new_tokens=8)).output_ids
    end = free[3]
    monkeypatch.setattr("models.generate.generation.eos_ids", lambda _model: {end})
    result = generate(bundled, PROMPT, GenerationSettings(max_new_tokens=8))
    assert result.stop == "eos"
    assert result.output_ids == free[: free.index(end) + 1]


@pytest.mark.parametrize(
    "settings, words",
    [
        (GenerationSettings(max_new_tokens=500), "at most 128 tokens"),
        (GenerationSettings(decoding="sample", temperature=0.0), TEMPERATURE_WORDS),
        (GenerationSettings(decoding="sample", temperature=-1.0), TEMPERATURE_WORDS),
        (GenerationSettings(top_p=0.0), "top-p must lie in (0, 1]"),
        (GenerationSettings(top_p=1.5), "top-p must lie in (0, 1]"),
        (GenerationSettings(max_new_tokens=0), "between 1 and"),
        (GenerationSettings(chat=True), "no chat template"),
    ],
)
def test_bad_settings_say_what_is_wrong(bundled, settings, words):
    with pytest.raises(GenerationError) as err:
        generate(bundled, PROMPT, settings)
    assert words in str(err.value)
    assert isinstance(err.value, UserError)


def test_empty_prompt_and_encoder_are_refused(bundled, minilm):
    with pytest.raises(PromptError, match="empty"):
        generate(bundled, "   ", GenerationSettings())
    with pytest.raises(GenerationError, match="encoder"):
        generate(minilm, PROMPT, GenerationSettings(max_new_tokens=3))


def test_cancel_stops_cleanly(bundled):
    seen = []

    def on_step(step):
        seen.append(step)
        assert step.rows is not None
        assert step.rows.shape == (3, 4, len(tokenize(bundled, PROMPT)[0][0]) + step.index)
        if step.index == 2:
            raise Cancelled("stopped")

    with pytest.raises(Cancelled):
        generate(bundled, PROMPT, GenerationSettings(max_new_tokens=10), on_step=on_step)
    assert len(seen) == 3
    assert getattr(_local, "handler", None) is None
    assert not bundled.lock.locked()
    again = generate(bundled, PROMPT, GenerationSettings(max_new_tokens=3))
    assert len(again.steps) == 3


def test_progress_reaches_one_and_other_threads_are_untouched(bundled):
    fractions, other = [], {}

    def look():
        other["handler"] = getattr(_local, "handler", None)

    def progress(fraction, _text):
        fractions.append(fraction)
        thread = threading.Thread(target=look)
        thread.start()
        thread.join()

    generate(bundled, PROMPT, GenerationSettings(max_new_tokens=4), progress=progress)
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert other["handler"] is None


def test_kept_steps_hold_only_their_own_numbers(bundled):
    """A step's sink and prompt share are small arrays of their own, not views that keep the
    step's whole ``layer head_index key_pos`` rows alive (4 MiB a step on SmolLM2 after 4,000
    tokens: a server's memory grew by that much per written token)."""
    from ui.runtime.store import size_of

    live: list = []
    result = generate(bundled, PROMPT, GenerationSettings(max_new_tokens=5), on_step=live.append)
    facts = bundled.facts
    per_head = facts.n_layers * facts.n_heads * 4  # one float32 per head
    for kept in (*result.steps, *[replace(s, rows=None) for s in live]):
        for series in (kept.sink, kept.prompt_share):
            assert series.base is None and series.nbytes == per_head
        assert size_of(kept) < 3 * per_head + 1024
    held = sum(size_of(getattr(result, f.name)) for f in fields(result))
    assert result.nbytes <= held <= result.nbytes + 64 * 1024  # what it states is what it holds


def test_rows_series_copy_instead_of_viewing():
    from models.generate.rows import row_series

    rows = torch.rand(3, 4, 1000)
    sink, share = row_series(rows, 10)
    assert sink.base is None and share.base is None
    np.testing.assert_array_equal(sink, rows[..., 0].numpy())
    np.testing.assert_allclose(share, rows[..., :10].sum(-1).numpy(), rtol=1e-6)
