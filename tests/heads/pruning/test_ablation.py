"""Ablation through the app's functions against hand-written hooks on the bundled model."""

import numpy as np
import pytest
import torch

from models.heads import ablation
from models.heads.ablation import (ablated_loss, cumulative_pruning, gradient_importance,
                                   head_means, single_head_effects, task_loss)
from models.heads.loss import reference_task

TEXT = ('import os\n\n\ndef list_python_files(root):\n    """Return every .py file under root."""\n'
        '    found = []\n    for folder, _dirs, files in os.walk(root):\n'
        '        for name in files:\n            if name.endswith(".py"):\n'
        '                found.append(os.path.join(folder, name))\n    return sorted(found)\n')


@pytest.fixture(scope="module")
def task(bundled):
    return reference_task(bundled, TEXT)


def bridge_loss(model, ids, hooks=()) -> float:
    """The bridge's own next-token loss (TransformerLens's formula), with manual hooks."""
    with model.lock, torch.no_grad():
        return float(model.bridge.run_with_hooks(ids, fwd_hooks=list(hooks), return_type="loss"))


def zero_head(head: int):
    def hook(z, hook):
        z = z.clone()
        z[:, :, head, :] = 0.0
        return z
    return hook


def hook_count(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.bridge.modules())


def test_ablating_nothing_changes_nothing(bundled, task):
    clean = bridge_loss(bundled, task.ids)
    assert task_loss(bundled, task) == pytest.approx(clean, abs=1e-6)
    assert ablated_loss(bundled, task, []) == task_loss(bundled, task)
    assert ablated_loss(bundled, task, [], "mean", head_means(bundled, task)) == task_loss(
        bundled, task)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_zero_ablation_equals_a_manual_hook(bundled, task, where):
    n_layers, n_heads = bundled.facts.n_layers, bundled.facts.n_heads
    layer, head = {"first": (0, 0), "middle": (n_layers // 2, n_heads // 2),
                   "last": (n_layers - 1, n_heads - 1)}[where]
    manual = (bridge_loss(bundled, task.ids, [(f"blocks.{layer}.attn.hook_z", zero_head(head))])
              - bridge_loss(bundled, task.ids))
    app = ablated_loss(bundled, task, [(layer, head)]) - task_loss(bundled, task)
    assert app == pytest.approx(manual, abs=1e-5)
    assert abs(manual) > 1e-6  # the head does something, so the check has teeth


def test_single_head_effects_match_manual_hooks_for_every_head(bundled, task):
    base = task_loss(bundled, task)
    effects = single_head_effects(bundled, task, "zero", base)
    clean = bridge_loss(bundled, task.ids)
    for layer, head in np.ndindex(*effects.shape):
        manual = bridge_loss(bundled, task.ids,
                             [(f"blocks.{layer}.attn.hook_z", zero_head(head))]) - clean
        assert effects[layer, head] == pytest.approx(manual, abs=1e-5), (layer, head)


def test_mean_ablation_equals_a_manual_hook(bundled, task):
    layer, head = bundled.facts.n_layers // 2, bundled.facts.n_heads - 1
    with torch.no_grad():
        _, cache = bundled.bridge.run_with_cache(task.ids)
    mean = cache[f"blocks.{layer}.attn.hook_z"][0, :, head].mean(0)

    def to_mean(z, hook):
        z = z.clone()
        z[:, :, head] = mean
        return z

    manual = (bridge_loss(bundled, task.ids, [(f"blocks.{layer}.attn.hook_z", to_mean)])
              - bridge_loss(bundled, task.ids))
    app = ablated_loss(bundled, task, [(layer, head)], "mean", head_means(bundled, task))
    assert app - task_loss(bundled, task) == pytest.approx(manual, abs=1e-5)


def test_gradient_importance_matches_finite_differences(bundled, task):
    grad, base = gradient_importance(bundled, task)
    assert base == pytest.approx(task_loss(bundled, task), abs=1e-6)
    assert grad.shape == (bundled.facts.n_layers, bundled.facts.n_heads)
    assert all(p.grad is None for p in bundled.bridge.parameters())
    eps = 0.05
    for flat in np.argsort(grad.ravel())[-3:]:
        layer, head = np.unravel_index(flat, grad.shape)

        def scale(factor):
            def hook(z, hook):
                z = z.clone()
                z[:, :, head] = z[:, :, head] * factor
                return z
            return bridge_loss(bundled, task.ids, [(f"blocks.{layer}.attn.hook_z", hook)])

        finite = abs(scale(1 + eps) - scale(1 - eps)) / (2 * eps)
        assert grad[layer, head] == pytest.approx(finite, rel=0.05, abs=1e-4)


def test_cumulative_pruning_ablates_heads_together(bundled, task):
    n_layers, n_heads = bundled.facts.n_layers, bundled.facts.n_heads
    heads = [(n_layers - 1, 1), (0, n_heads - 1), (n_layers // 2, 0)]
    losses = cumulative_pruning(bundled, task, heads, "zero")
    assert losses[0] == task_loss(bundled, task)
    hooks = {}
    for layer, head in heads:  # one manual pass with all three heads zeroed
        hooks.setdefault(layer, []).append(head)

    def zero_many(idx):
        def hook(z, hook):
            z = z.clone()
            z[:, :, idx] = 0.0
            return z
        return hook

    together = bridge_loss(bundled, task.ids, [(f"blocks.{l}.attn.hook_z", zero_many(i))
                                               for l, i in hooks.items()])
    assert losses[3] == pytest.approx(together, abs=1e-5)
    assert losses[2] == ablated_loss(bundled, task, heads[:2])


def test_interrupted_measurement_leaves_the_model_clean(bundled, task):
    before = hook_count(bundled)
    clean = task_loss(bundled, task)
    calls = []

    def stop_after_three(fraction, text):
        calls.append(text)
        if len(calls) > 3:
            raise KeyboardInterrupt("inputs changed")

    with pytest.raises(KeyboardInterrupt):
        ablation.measure_importance(bundled, task, stop_after_three)
    assert not bundled.lock.locked()
    assert hook_count(bundled) == before
    assert task_loss(bundled, task) == clean
