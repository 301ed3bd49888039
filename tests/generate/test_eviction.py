"""Reading a text with a bounded KV cache: against a plain forward with labels and against a
token-by-token reference that really caches, evicts and re-rotates (tests/generate/reference.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.generate.eviction import full_pass, perplexity, policy_pass
from models.generate.settings import GenerationError
from models.generate.sweep import (
    EvictionSettings,
    bundled_passage,
    estimate,
    eviction_sweep,
    sink_verdict,
)
from models.model.forward import tokenize
from models.progress import Cancelled
from tests.generate.reference import read_with_eviction

POLICIES = ("window", "sinks", "h2o")


def passage_ids(model, n: int) -> torch.Tensor:
    return tokenize(model, bundled_passage(), n)[0]


@pytest.fixture
def one_thread():
    """The reference's many tiny operations run far faster on one thread of a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", ["bundled", "smollm2"])
def test_full_cache_equals_plain_perplexity(request, eager, name):
    """Against a plain forward with labels (eager attention: another kernel than ours)."""
    model = request.getfixturevalue(name)
    ids = passage_ids(model, 64)
    with torch.no_grad():
        plain = float(torch.exp(eager(model)(ids, labels=ids).loss))
    assert perplexity(full_pass(model, ids).losses) == pytest.approx(plain, rel=1e-5)


@pytest.mark.parametrize("policy", POLICIES)
def test_budget_at_least_the_length_equals_the_full_cache(bundled, policy):
    ids = passage_ids(bundled, 48)
    full = full_pass(bundled, ids).losses
    for budget in (48, 100):
        got = policy_pass(bundled, ids, policy, budget, sinks=4)  # the whole pass, no sharing
        np.testing.assert_allclose(got.numpy(), full.numpy(), atol=5e-5)


def test_bounded_budgets_change_the_losses(bundled):
    ids = passage_ids(bundled, 48)
    full = full_pass(bundled, ids).losses
    for policy in POLICIES:
        got = policy_pass(bundled, ids, policy, 12, sinks=4)
        # nothing is evicted before the cache fills
        np.testing.assert_allclose(got[:12].numpy(), full[:12].numpy(), atol=5e-5)
        assert float((got[12:] - full[12:]).abs().max()) > 1e-3


@pytest.mark.parametrize("policy", POLICIES)
def test_policies_equal_a_cache_that_really_evicts(smollm2, eager, one_thread, policy):
    """SmolLM2 (RoPE, GQA), 20 tokens, budget 6, 2 sinks: the one-pass policy (after the shared
    prefix) against reading token by token with re-rotated pre-rotation keys."""
    ids = passage_ids(smollm2, 20)
    full = full_pass(smollm2, ids, checkpoints=(6,))
    got = policy_pass(smollm2, ids, policy, 6, sinks=2, full=full)
    want = read_with_eviction(eager(smollm2), ids, policy, 6, sinks=2)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-4)


@pytest.mark.parametrize("policy", POLICIES)
def test_shared_prefix_equals_the_whole_pass(bundled, policy):
    ids = passage_ids(bundled, 64)
    full = full_pass(bundled, ids, checkpoints=(16, 40))
    for budget in (16, 40):
        whole = policy_pass(bundled, ids, policy, budget, sinks=4)
        shared = policy_pass(bundled, ids, policy, budget, sinks=4, full=full)
        np.testing.assert_allclose(shared.numpy(), whole.numpy(), atol=2e-5)


def test_sweep_rows_progress_and_verdict(bundled):
    text = bundled_passage()
    settings = EvictionSettings(budgets=(16, 32, 500), sinks=4, max_tokens=96)
    seen = []
    result = eviction_sweep(bundled, text, settings, lambda f, t: seen.append(f))
    ids = passage_ids(bundled, 96)
    assert result.n_tokens == ids.shape[1] == 96
    rows = result.rows()
    assert rows[0] == ("full", 96, result.full_perplexity)
    assert [(p, b) for p, b, _ in rows[1:]] == [(p, b) for p in POLICIES for b in (16, 32, 500)]
    for policy in POLICIES:
        assert result.perplexity(policy, 500) == result.full_perplexity
        direct = perplexity(policy_pass(bundled, ids, policy, 16, sinks=4))
        assert result.perplexity(policy, 16) == pytest.approx(direct, rel=1e-5)
    assert seen == sorted(seen) and seen[-1] == 1.0
    verdict = sink_verdict(result)
    assert f"{result.perplexity('window', 16):,.2f} without sinks" in verdict
    assert estimate(bundled, 96, settings).seconds() > 0


def test_sweep_cancel_and_bad_settings(bundled, minilm):
    def stop(fraction, _text):
        if fraction > 0.3:
            raise Cancelled("stopped")

    with pytest.raises(Cancelled):
        eviction_sweep(bundled, bundled_passage(), EvictionSettings(budgets=(16,)), stop)
    with pytest.raises(GenerationError, match="exceed the 4 sink tokens"):
        eviction_sweep(bundled, "some text", EvictionSettings(budgets=(4, 8), sinks=4))
    with pytest.raises(GenerationError, match="encoder"):
        eviction_sweep(minilm, "some text", EvictionSettings(budgets=(8,)))
    with pytest.raises(GenerationError, match="at least 2 tokens"):
        eviction_sweep(bundled, "some text", EvictionSettings(budgets=(8,), max_tokens=1))
