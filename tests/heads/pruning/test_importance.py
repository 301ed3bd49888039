"""Batched, resumed ablation against one pass per head set (the plain path and hand-written
hooks), corpus means against per-text ones, and what the estimates say it costs."""

import numpy as np
import pytest
import torch

from models.heads.cost import Meter
from models.heads.pruning.ablation import ablated_loss, copy_hooks, mask_gradient
from models.heads.pruning.importance import (
    ablated_losses,
    clean_text,
    corpus_losses,
    curve_points,
    importance_estimate,
    measure_corpus_importance,
    pruning_curve,
)
from models.heads.pruning.loss import corpus_tasks
from models.model.forward import run_with_hooks
from models.model.resume import clean_pass, run_resumed
from tests.heads.reference import bridge_loss, head_means, single_head_effects

TEXTS = (
    "def area(width, height):\n    return width * height\n\n\nprint(area(3, 4))\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n"
    "        self.items.append(x)\n",
    "values = [1, 2, 3]\nfor value in values:\n    print(value * value)\n",
)


@pytest.fixture(scope="module")
def tasks(bundled):
    return corpus_tasks(bundled, TEXTS)


def test_resumed_pass_equals_the_full_pass(bundled, tasks):
    ids = tasks[0].ids
    logits, _, outputs = clean_pass(bundled, ids)
    assert outputs is not None and len(outputs) == bundled.facts.n_layers
    assert torch.equal(logits, run_with_hooks(bundled, ids))
    hooks = copy_hooks([[(2, 1)], [(2, 3)]], "zero")
    full = run_with_hooks(bundled, ids.repeat(2, 1), hooks)
    resumed = run_resumed(bundled, ids, hooks, 2, outputs, copies=2)
    torch.testing.assert_close(resumed, full, atol=1e-5, rtol=0)
    assert torch.equal(run_with_hooks(bundled, ids), logits)  # the skipped blocks are restored


def test_batched_copies_match_one_pass_per_head_set(bundled, tasks):
    clean = clean_text(bundled, tasks[1])
    assert clean.loss == pytest.approx(bridge_loss(bundled, tasks[1].ids), abs=1e-6)
    masks = [[(0, 0)], [(1, 2), (2, 0)], [], [(2, 3)], [(0, 1), (0, 3), (2, 2)]]
    got = ablated_losses(bundled, clean, masks)
    want = [ablated_loss(bundled, tasks[1], m) for m in masks]
    np.testing.assert_allclose(got, want, atol=1e-5)
    means = head_means(bundled, tasks[1].ids)
    got = ablated_losses(bundled, clean, masks, "mean", means)
    want = [ablated_loss(bundled, tasks[1], m, "mean", means) for m in masks]
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_corpus_importance_is_the_mean_of_per_text_effects(bundled, tasks):
    seen = []
    imp = measure_corpus_importance(bundled, tasks, progress=lambda f, t: seen.append(f))
    zero = np.stack([single_head_effects(bundled, t.ids) for t in tasks])
    np.testing.assert_allclose(imp.spreads["zero"].per_text, zero, atol=1e-5)
    np.testing.assert_allclose(imp.zero, zero.mean(axis=0), atol=1e-5)
    # mean-ablation uses the heads' means over the whole corpus, position-weighted
    names_means = torch.cat([head_means(bundled, t.ids)[None] * t.ids.shape[1] for t in tasks])
    means = names_means.sum(0) / sum(t.ids.shape[1] for t in tasks)
    torch.testing.assert_close(imp.means, means, atol=1e-5, rtol=1e-5)
    mean = np.stack([single_head_effects(bundled, t.ids, means) for t in tasks])
    np.testing.assert_allclose(imp.mean, mean.mean(axis=0), atol=1e-5)
    grads = [np.abs(mask_gradient(bundled, t)[0]) for t in tasks]
    np.testing.assert_allclose(imp.gradient, np.mean(grads, axis=0), rtol=1e-6)
    signed = np.mean([mask_gradient(bundled, t)[0] for t in tasks], axis=0)
    np.testing.assert_allclose(imp.first_order, -signed, rtol=1e-6)
    assert imp.base_loss == pytest.approx(np.mean([bridge_loss(bundled, t.ids) for t in tasks]))
    assert imp.n_texts == 3 and imp.n_targets == sum(t.n_targets for t in tasks)
    assert seen == sorted(seen) and seen[-1] == 1.0 and 0.0 <= seen[0] < 0.1


def test_pruning_curve_ablates_heads_together(bundled, tasks):
    order = [(2, 1), (0, 2), (1, 1), (0, 0)]
    ks, losses = pruning_curve(bundled, tasks, order)
    assert ks == [0, 1, 2, 3, 4]
    for k, loss in zip(ks, losses, strict=True):
        want = np.mean([ablated_loss(bundled, t, order[:k]) for t in tasks])
        assert loss == pytest.approx(want, abs=1e-5)
    assert corpus_losses(bundled, tasks, [[]])[0] == pytest.approx(
        np.mean([bridge_loss(bundled, t.ids) for t in tasks]), abs=1e-6
    )


def test_curve_points_cover_both_ends():
    assert curve_points(12) == list(range(13)) and curve_points(48) == list(range(49))
    ks = curve_points(270)
    assert ks[0] == 0 and ks[-1] == 270 and len(ks) == 17 and ks == sorted(set(ks))


def test_meter_reports_the_share_of_work_done():
    seen = []
    meter = Meter(lambda f, t: seen.append((f, t)), total=10)
    meter.step(4, "a")
    meter.step(6, "b")
    assert seen == [(0.0, "a"), (0.4, "b")]


def test_smollm2_resumed_batches_match_single_passes(smollm2):
    task = corpus_tasks(smollm2, ["The cat sat on the mat, and the cat slept."])[0]
    clean = clean_text(smollm2, task)
    masks = [[(7, 0)], [(7, 8)], [(29, 4)]]
    got = ablated_losses(smollm2, clean, masks)
    np.testing.assert_allclose(got, [ablated_loss(smollm2, task, m) for m in masks], atol=1e-4)


def test_importance_estimate_grows_with_the_text_and_the_gradient(bundled):
    short = importance_estimate(bundled, [64], ("zero",))
    long = importance_estimate(bundled, [128], ("zero",))
    grad = importance_estimate(bundled, [128], ("zero", "gradient"))
    assert 0 < short.seconds() < long.seconds() < grad.seconds()
    assert 0 < short.peak_bytes < long.peak_bytes <= grad.peak_bytes
