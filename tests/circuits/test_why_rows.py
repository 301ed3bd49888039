"""RoPE bands, whole rows and one pair over the prompt, against plain ``transformers``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM
from transformers.models.bloom.modeling_bloom import build_alibi_tensor

from models.circuits.why import split
from models.circuits.why_bands import band_split
from models.circuits.why_keep import WhyUnavailable, keep
from models.circuits.why_rows import pair_map, row_split
from models.head import Head
from models.model.forward import tokenize
from models.model.loading import load
from models.model.spec import ModelSpec
from tests.attention.tiny_models import PROMPT, build_all

TOL = 1e-5


@pytest.fixture(scope="module")
def more_tiny(tmp_path_factory):
    """Tiny random Llama (GQA), GPT-NeoX (partial rotary) and Bloom (ALiBi) checkpoints."""
    dirs = build_all(tmp_path_factory.mktemp("why_more"))
    return {name: (path, load(ModelSpec(str(path)))) for name, path in dirs.items()}


@pytest.mark.parametrize("name", ["qwen3_qk_norm", "gemma2_softcap"])
def test_bands_add_up_to_the_pairs_and_the_reference_score(why_cases, name):
    model, ref, ids = why_cases[name]
    head, query, key = Head(1, 3), ids.shape[1] - 1, ids.shape[1] - 6
    raw = ref.raw(ref.run(ids), head.layer, head.index)
    kept = keep(model, ids, head)
    bands = band_split(kept, query, key)
    cell = split(kept, query, key)
    np.testing.assert_allclose(bands.pairs.sum(axis=-1), cell.pairs, atol=1e-12)
    row_scale = float(raw[query, : query + 1].abs().max())
    assert abs(bands.totals.sum() - float(raw[query, key])) <= TOL * row_scale
    theta = model.bridge.original_model.config.rope_parameters["rope_theta"]
    d_head = model.facts.d_head
    expected = [2 * math.pi * theta ** (2 * f / d_head) for f in range(d_head // 2)]
    np.testing.assert_allclose(bands.wavelengths, expected, rtol=1e-3)
    assert bands.labels == tuple(str(f) for f in range(d_head // 2))
    # the planes carry different shares (a split that spread the score evenly, or put all of
    # it in one plane, would fail the sums above or this)
    assert np.abs(bands.totals).min() < 0.5 * np.abs(bands.totals).max()


def test_partial_rotary_keeps_an_unrotated_band(more_tiny):
    model = more_tiny["neox_partial_rope"][1]
    ids, _ = tokenize(model, PROMPT)
    kept = keep(model, ids, Head(1, 2))
    bands = band_split(kept, 30, 12)
    rotary = kept.query.cos.shape[-1]
    assert bands.labels[-1] == "unrotated" and len(bands.labels) == rotary // 2 + 1
    assert bands.wavelengths[-1] == np.inf
    cell = split(kept, 30, 12)
    assert bands.totals.sum() == pytest.approx(cell.total, abs=1e-12)
    assert abs(bands.totals[-1]) > 1e-3  # the unrotated dimensions do score


def test_learned_positions_have_no_bands(why_cases):
    model, _, ids = why_cases["bundled"]
    with pytest.raises(WhyUnavailable, match="no RoPE"):
        band_split(keep(model, ids, Head(1, 0)), 10, 2)


def test_alibi_is_a_part_of_its_own_and_the_weights_are_the_models(more_tiny):
    path, model = more_tiny["bloom_alibi_6_heads"]
    ids, _ = tokenize(model, PROMPT)
    head, query, key = Head(1, 4), ids.shape[1] - 1, 7
    cell = split(keep(model, ids, head), query, key)
    hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        weights = hf(ids, output_attentions=True).attentions[1][0, head.index, query]
    alibi = build_alibi_tensor(torch.ones(1, 2), 6, torch.float64)  # slope * key position
    slope = float(alibi[head.index, 0, 1])
    assert cell.position_bias == pytest.approx(-slope * (query - key), rel=1e-6)
    assert cell.total == pytest.approx(cell.score, abs=TOL * cell.row_scale)
    assert cell.weight == pytest.approx(float(weights[key]), abs=TOL)
    assert cell.rows()[-1].query_part == cell.rows()[-1].key_part == "alibi"


@pytest.mark.parametrize(("name", "head"), [("bundled", Head(2, 3)), ("minilm", Head(4, 5))])
def test_a_whole_row_splits_into_each_sides_shares(why_cases, name, head):
    model, ref, ids = why_cases[name]
    records = ref.run(ids)
    raw = ref.raw(records, head.layer, head.index)
    query = 9
    weights = records[head.layer]["weights"][0, head.index, query].numpy()
    row = row_split(keep(model, ids, head), query)
    seen = weights > 0
    row_scale = float(raw[query][seen].abs().max())
    expected_raw = raw[query].numpy()
    np.testing.assert_allclose(row.weights, weights, atol=TOL)
    np.testing.assert_allclose(
        row.query_shares.sum(0)[seen], expected_raw[seen], atol=TOL * row_scale
    )
    np.testing.assert_allclose(
        row.key_shares.sum(0)[seen], expected_raw[seen], atol=TOL * row_scale
    )
    assert row.expected.sum() == pytest.approx(
        float((weights * expected_raw).sum()), abs=TOL * row_scale
    )
    if not model.facts.causal:
        assert seen[query + 1 :].all()  # keys after the query count too


def test_a_pair_over_the_prompt_is_the_pair_of_each_cell(why_cases):
    model, _, ids = why_cases["qwen3_qk_norm"]
    kept = keep(model, ids, Head(2, 0))
    mapped = pair_map(kept, "embed", "1.1")
    n = ids.shape[1]
    assert mapped.values.shape == (n, n)
    assert np.isnan(mapped.values[3, 4]) and not np.isnan(mapped.values[4, 3])
    for query, key in [(n - 1, 0), (n - 1, n - 1), (20, 13)]:
        cell = split(kept, query, key)
        expected = cell.pairs[cell.query_parts.index("embed"), cell.key_parts.index("1.1")]
        assert mapped.values[query, key] == pytest.approx(expected, abs=TOL * cell.row_scale)
    row = row_split(kept, 20)
    pair = row.expected[row.query_parts.index("embed"), row.key_parts.index("1.1")]
    assert mapped.per_query[20] == pytest.approx(pair, abs=TOL)
    with pytest.raises(KeyError):
        pair_map(kept, "embed", "b_Q")
