"""Comparing two prompts: JSD by hand, alignment by hand, per-head divergence against HF eager."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from transformers import GPT2LMHeadModel

from models.capture.compare import (
    DIVERGENCE_RULE,
    divergence_csv,
    head_divergence,
    jensen_shannon,
)
from models.capture.compare_cost import compare_cost
from models.capture.difference import difference_window, query_divergence
from models.capture.run import capture
from models.capture.word_split import split_words
from models.capture.words import merge_pattern
from models.model.forward import tokenize
from models.model.spec import BUNDLED_DIR

SAME_A = "When Mary and John went to the store, John gave a drink to Mary"
SAME_B = "When Mary and John went to the store, Mary gave a drink to John"
LONGER_B = "When Mary and Johnathan Smith went to the store, John gave a drink to Mary"


# --- Jensen–Shannon by hand --------------------------------------------------------------------


def test_jsd_of_disjoint_rows_is_one_bit():
    assert jensen_shannon(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)


def test_jsd_half_half_against_one_hot_by_hand():
    # m = (.75, .25); JSD = ½(½ log2(½/.75) + ½ log2(½/.25)) + ½(log2(1/.75))
    expected = 0.5 * (0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25)) + 0.5 * math.log2(
        1 / 0.75
    )
    assert expected == pytest.approx(0.311278, abs=1e-6)
    got = jensen_shannon(np.array([0.5, 0.5]), np.array([1.0, 0.0]))
    assert got == pytest.approx(expected, abs=1e-12)


def test_jsd_is_zero_for_equal_rows_and_matches_scipy():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(7), size=5), rng.dirichlet(np.ones(7), size=5)
    assert np.all(jensen_shannon(p, p) == 0.0)
    expected = [jensenshannon(a, b, base=2) ** 2 for a, b in zip(p, q, strict=True)]
    np.testing.assert_allclose(jensen_shannon(p, q), expected, atol=1e-12)


# --- per-head divergence -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_bundled():
    return GPT2LMHeadModel.from_pretrained(BUNDLED_DIR, attn_implementation="eager").eval()


def hf_attention(hf, model, text: str) -> np.ndarray:
    ids, _ = tokenize(model, text)
    with torch.no_grad():
        out = hf(ids, output_attentions=True)
    return torch.stack(out.attentions)[:, 0].double().numpy()


def prefix_suffix_pairs(ids_a, ids_b) -> list[tuple[int, int]]:
    """Equal lengths position by position, else the common prefix and suffix, written out."""
    n_a, n_b = len(ids_a), len(ids_b)
    if n_a == n_b:
        return [(i, i) for i in range(n_a)]
    p = 0
    while p < min(n_a, n_b) and ids_a[p] == ids_b[p]:
        p += 1
    s = 0
    while s < min(n_a, n_b) - p and ids_a[-1 - s] == ids_b[-1 - s]:
        s += 1
    return [(i, i) for i in range(p)] + [(n_a - s + j, n_b - s + j) for j in range(s)]


def reference_divergence(pa: np.ndarray, pb: np.ndarray, pairs) -> np.ndarray:
    """Written out loop by loop: each aligned row onto the aligned keys + one bin of the rest."""
    n_a, n_b = pa.shape[-1], pb.shape[-1]
    aligned_a = {i for i, _ in pairs}
    aligned_b = {j for _, j in pairs}
    out = np.zeros(pa.shape[:2])
    for layer in range(pa.shape[0]):
        for head in range(pa.shape[1]):
            total = 0.0
            for qa, qb in pairs:
                row_a = [pa[layer, head, qa, ka] for ka, _ in pairs]
                row_b = [pb[layer, head, qb, kb] for _, kb in pairs]
                if n_a != n_b:
                    row_a.append(
                        sum(pa[layer, head, qa, k] for k in range(n_a) if k not in aligned_a)
                    )
                    row_b.append(
                        sum(pb[layer, head, qb, k] for k in range(n_b) if k not in aligned_b)
                    )
                total += jensenshannon(row_a, row_b, base=2) ** 2
            out[layer, head] = total / len(pairs)
    return out


@pytest.mark.parametrize("text_b", [SAME_B, LONGER_B])
def test_divergence_matches_hf_eager(bundled, hf_bundled, text_b):
    run_a, run_b = capture(bundled, SAME_A), capture(bundled, text_b)
    expected = reference_divergence(
        hf_attention(hf_bundled, bundled, SAME_A),
        hf_attention(hf_bundled, bundled, text_b),
        prefix_suffix_pairs(list(run_a.token_ids), list(run_b.token_ids)),
    )
    got = head_divergence(run_a, run_b)
    assert got.divergence.shape == (3, 4)
    assert expected.max() > 0.01  # the swap moved something
    np.testing.assert_allclose(got.divergence, expected, atol=2e-6)


def test_a_prompt_against_itself_is_zero_for_every_head(any_model):
    run = capture(any_model, SAME_A)
    assert np.all(head_divergence(run, run).divergence == 0.0)


def test_factored_store_gives_the_dense_numbers(bundled):
    dense = head_divergence(capture(bundled, SAME_A), capture(bundled, LONGER_B))
    factored = head_divergence(
        capture(bundled, SAME_A, dense_limit=0), capture(bundled, LONGER_B, dense_limit=0)
    )
    np.testing.assert_allclose(factored.divergence, dense.divergence, atol=2e-6)
    self_run = capture(bundled, SAME_A, dense_limit=0)
    assert np.all(head_divergence(self_run, self_run).divergence == 0.0)


def test_word_space_divergence_merges_rows_first(bundled, hf_bundled):
    run_a, run_b = capture(bundled, SAME_A), capture(bundled, LONGER_B)
    words = [
        split_words(bundled.tokenizer, r.prompt, r.token_ids, r.tokens) for r in (run_a, run_b)
    ]
    pa = merge_pattern(hf_attention(hf_bundled, bundled, SAME_A), words[0])
    pb = merge_pattern(hf_attention(hf_bundled, bundled, LONGER_B), words[1])
    keys = [w.keys(r.token_ids) for w, r in zip(words, (run_a, run_b), strict=True)]
    expected = reference_divergence(pa, pb, prefix_suffix_pairs(keys[0], keys[1]))
    got = head_divergence(run_a, run_b, words[0], words[1])
    assert got.words and got.alignment.n_a == words[0].n_words
    np.testing.assert_allclose(got.divergence, expected, atol=2e-6)


def test_difference_window_and_query_divergence_agree(bundled):
    run_a, run_b = capture(bundled, SAME_A), capture(bundled, LONGER_B)
    result = head_divergence(run_a, run_b)
    al = result.alignment
    a, b, diff = difference_window(run_a, run_b, al, 2, 1, slice(None), slice(None))
    assert diff.shape == (al.n_aligned, al.n_keys)
    np.testing.assert_allclose(np.nansum(a, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.nansum(b, axis=1), 1.0, atol=1e-5)
    assert np.isnan(diff[0, 1]) and np.isnan(diff[0, al.bin_index])  # later key, later bin
    assert np.isfinite(diff[-1, al.bin_index])
    per_query = query_divergence(run_a, run_b, al, 2, 1)
    assert per_query.mean() == pytest.approx(result.divergence[2, 1], abs=1e-6)
    expected = [
        jensenshannon(np.nan_to_num(x), np.nan_to_num(y), base=2) ** 2
        for x, y in zip(a, b, strict=True)
    ]
    np.testing.assert_allclose(per_query, expected, atol=1e-6)
    part = difference_window(run_a, run_b, al, 2, 1, slice(5, 9), slice(3, 12))[2]
    np.testing.assert_array_equal(part, diff[5:9, 3:12])


def test_ranking_csv_and_rule(bundled):
    result = head_divergence(capture(bundled, SAME_A), capture(bundled, SAME_B))
    table = result.ranking()
    assert list(table.columns) == ["head", "layer", "index", "divergence"]
    assert table["divergence"].is_monotonic_decreasing and len(table) == 12
    top = table.iloc[0]
    assert result.divergence[top["layer"], top["index"]] == result.divergence.max()
    lines = divergence_csv(result.divergence).splitlines()
    assert lines[0] == "layer,head,divergence" and len(lines) == 13
    assert lines[6].split(",")[:2] == ["1", "1"]
    assert "unaligned" in DIVERGENCE_RULE and "base 2" in DIVERGENCE_RULE


def test_cost_grows_with_length_and_peak_stays_bounded(bundled):
    facts = replace(bundled.facts, n_layers=30, n_heads=9, n_kv_heads=3, d_head=64)  # SmolLM2
    small, large = compare_cost(facts, 256, 256, False), compare_cost(facts, 2048, 2050, True)
    assert large.flops > 64 * small.flops and large.seconds() > small.seconds() > 0
    full_stack = facts.n_layers * facts.n_heads * 2048 * 2048 * 4
    assert large.peak_bytes < full_stack / 20  # a band of rows, never every pattern


# --- one identifier renamed twice: the diff aligns everything after it --------------------------

CODE_A = (
    "def moving_average(values, window):\n"
    "    total = sum(values[:window])\n"
    "    return total / window\n\n"
    "def moving_average(values, window):\n"
    "    total = sum(values[:window])\n"
    "    return total / window\n"
)
CODE_B = CODE_A.replace("moving_average", "moving_sum")


def numpy_jsd(p: np.ndarray, q: np.ndarray) -> float:
    """JSD in bits with 0 log 0 = 0, in plain NumPy."""
    m = (p + q) / 2

    def plogp(x):
        return np.where(x > 0, x * np.log2(np.where(x > 0, x, 1.0)), 0.0)

    return float(np.sum(0.5 * plogp(p) + 0.5 * plogp(q) - plogp(m)))


def test_a_renamed_identifier_aligns_the_tokens_after_it(bundled):
    run_a, run_b = capture(bundled, CODE_A), capture(bundled, CODE_B)
    assert (run_a.n_tokens, run_b.n_tokens) == (78, 76)
    # "_average" is the pieces "a ver age" (A 6-8, 45-47), "_sum" is "s um" (B 6-7, 44-45).
    assert run_a.tokens[6:9] == run_a.tokens[45:48] == ("a", "ver", "age")
    assert run_b.tokens[6:8] == run_b.tokens[44:46] == ("s", "um")
    pairs = (
        [(i, i) for i in range(6)]
        + [(i, i - 1) for i in range(9, 45)]
        + [(i, i - 2) for i in range(48, 78)]
    )
    result = head_divergence(run_a, run_b)
    al = result.alignment
    assert list(zip(al.positions("a"), al.positions("b"), strict=True)) == pairs
    assert al.unaligned("a") == (range(6, 9), range(45, 48))
    assert al.unaligned("b") == (range(6, 8), range(44, 46))
    assert "72 of A's 78 tokens and of B's 76 aligned" in al.describe()
    assert "unaligned: A 6–8, 45–47; B 6–7, 44–45" in al.describe()
    # The reference: the captured patterns, rows and keys restricted to the pairs, the other
    # keys added into one bin, JSD in plain NumPy, mean over the 72 aligned rows.
    qa, qb = np.array([i for i, _ in pairs]), np.array([j for _, j in pairs])
    rest_a = np.setdiff1d(np.arange(78), qa)
    rest_b = np.setdiff1d(np.arange(76), qb)
    expected = np.zeros((3, 4))
    for layer in range(3):
        for head in range(4):
            pa = run_a.pattern(layer, head).astype(np.float64)
            pb = run_b.pattern(layer, head).astype(np.float64)
            rows_a = np.column_stack([pa[qa][:, qa], pa[qa][:, rest_a].sum(axis=1)])
            rows_b = np.column_stack([pb[qb][:, qb], pb[qb][:, rest_b].sum(axis=1)])
            expected[layer, head] = np.mean(
                [numpy_jsd(x, y) for x, y in zip(rows_a, rows_b, strict=True)]
            )
    np.testing.assert_allclose(result.divergence, expected, atol=1e-6)
    assert expected.max() > 0.01  # the renamed function moved some head
    # The rows before the rename see the same six tokens in A and B: they add nothing.
    per_query = query_divergence(run_a, run_b, al, 2, 2)
    np.testing.assert_allclose(per_query[:6], 0.0, atol=1e-6)
    assert per_query.mean() == pytest.approx(result.divergence[2, 2], abs=1e-6)
