"""Ablation on one text through the app's one pipeline (importance over a one-text corpus, the
pruning curve, the mask gradient, the plain path) against hand-written hooks on the bundled
model."""

import numpy as np
import pytest
import torch

from models.head import Head
from models.heads.pruning.ablation import ablated_loss, mask_gradient, pruning_order
from models.heads.pruning.importance import measure_corpus_importance, pruning_curve
from models.heads.pruning.loss import reference_task
from tests.heads.reference import (
    ablation_hooks,
    bridge_loss,
    head_means,
    replace_heads,
    single_head_effects,
    z_name,
)

TEXT = (
    'import os\n\n\ndef list_python_files(root):\n    """Return every .py file under root."""\n'
    "    found = []\n    for folder, _dirs, files in os.walk(root):\n"
    '        for name in files:\n            if name.endswith(".py"):\n'
    "                found.append(os.path.join(folder, name))\n    return sorted(found)\n"
)


@pytest.fixture(scope="module")
def task(bundled):
    return reference_task(bundled, TEXT)


@pytest.fixture(scope="module")
def importance(bundled, task):
    return measure_corpus_importance(bundled, [task], ("zero", "mean", "gradient"))


def hook_count(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.bridge.modules())


def test_ablating_nothing_changes_nothing(bundled, task, importance):
    clean = bridge_loss(bundled, task.ids)
    assert ablated_loss(bundled, task) == pytest.approx(clean, abs=1e-6)
    assert importance.base_loss == pytest.approx(clean, abs=1e-6)
    means = head_means(bundled, task.ids)
    assert ablated_loss(bundled, task, [], "mean", means) == ablated_loss(bundled, task)


def test_every_single_head_effect_matches_a_manual_hook(bundled, task, importance):
    manual = single_head_effects(bundled, task.ids)
    np.testing.assert_allclose(importance.zero, manual, atol=1e-5)
    assert np.abs(manual).max() > 1e-3  # the heads do something, so the check has teeth
    last = Head(bundled.facts.n_layers - 1, bundled.facts.n_heads - 1)
    assert ablated_loss(bundled, task, [last]) - bridge_loss(bundled, task.ids) == pytest.approx(
        manual[last], abs=1e-5
    )


def test_mean_ablation_uses_the_heads_mean_over_the_text(bundled, task, importance):
    means = head_means(bundled, task.ids)
    torch.testing.assert_close(importance.means, means, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(
        importance.mean, single_head_effects(bundled, task.ids, means), atol=1e-5
    )


def test_gradient_matches_finite_differences(bundled, task, importance):
    grad, base = mask_gradient(bundled, task)
    assert base == pytest.approx(bridge_loss(bundled, task.ids), abs=1e-6)
    np.testing.assert_allclose(importance.gradient, np.abs(grad), rtol=1e-6)
    np.testing.assert_allclose(importance.first_order, -grad, rtol=1e-6)
    assert all(p.grad is None for p in bundled.bridge.parameters())
    eps = 0.05
    for flat in np.argsort(np.abs(grad).ravel())[-3:]:
        layer, head = np.unravel_index(flat, grad.shape)

        def scale(factor, layer=layer, head=head):
            def hook(z, hook):
                z = z.clone()
                z[:, :, head] = z[:, :, head] * factor
                return z

            return bridge_loss(bundled, task.ids, [(z_name(layer), hook)])

        finite = (scale(1 + eps) - scale(1 - eps)) / (2 * eps)
        assert grad[layer, head] == pytest.approx(finite, rel=0.05, abs=1e-4)


def test_pruning_curve_ablates_heads_together(bundled, task):
    n_layers, n_heads = bundled.facts.n_layers, bundled.facts.n_heads
    order = [Head(n_layers - 1, 1), Head(0, n_heads - 1), Head(n_layers // 2, 0)]
    ks, losses = pruning_curve(bundled, [task], order)
    assert ks == [0, 1, 2, 3]
    assert losses[0] == pytest.approx(bridge_loss(bundled, task.ids), abs=1e-6)
    together = bridge_loss(bundled, task.ids, ablation_hooks(order))
    assert losses[3] == pytest.approx(together, abs=1e-5)
    assert losses[2] == pytest.approx(ablated_loss(bundled, task, order[:2]), abs=1e-5)


def test_pruning_order_least_important_first_nan_last():
    zero = np.array([[0.5, -0.1, 0.2], [np.nan, 0.0, 1.0]])
    order = pruning_order(zero)
    assert order == [(0, 1), (1, 1), (0, 2), (0, 0), (1, 2), (1, 0)]
    assert all(isinstance(h, Head) for h in order) and str(order[0]) == "0.1"


def test_interrupted_measurement_leaves_the_model_clean(bundled, task):
    before = hook_count(bundled)
    clean = ablated_loss(bundled, task)
    calls = []

    def stop_after_three(fraction, text):
        calls.append(text)
        if len(calls) > 3:
            raise KeyboardInterrupt("inputs changed")

    with pytest.raises(KeyboardInterrupt):
        measure_corpus_importance(bundled, [task], ("zero", "mean"), stop_after_three)
    assert not bundled.lock.locked()
    assert hook_count(bundled) == before
    assert ablated_loss(bundled, task) == clean


def test_a_manual_zero_hook_is_what_the_plain_path_does(bundled, task):
    layer, head = bundled.facts.n_layers // 2, bundled.facts.n_heads // 2
    manual = bridge_loss(bundled, task.ids, [(z_name(layer), replace_heads([head]))])
    assert ablated_loss(bundled, task, [(layer, head)]) == pytest.approx(manual, abs=1e-5)
