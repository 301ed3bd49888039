"""The two passes attribution patching and its edge estimates read, made once.

The clean prompt forward (no gradients) keeps every head's z, q, k and v, the rotated q and k
where the model rotates them, and the last query's attention row. The corrupted prompt forward
and backward (:func:`models.circuits.gradients.gradient_run`) keeps the same values, the
residual stream entering each block, the attention scores (QK fix), and the gradient of LD at
z, q, k, v and, with the QK fix, at each pattern.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from models.circuits.atp_fixes import softmax
from models.circuits.gradients import GradientRun, Keep, capture, check_hooks, gradient_run
from models.circuits.patching import MIN_GAP
from models.circuits.task import CircuitsUnavailable, Setup, TaskError
from models.model.forward import (
    Hook,
    QKSource,
    cos_hook,
    k_hook,
    missing_hooks,
    pattern_hook,
    q_hook,
    qk_names,
    qk_source,
    resid_pre_hook,
    scores_hook,
    sin_hook,
    softmax_qk,
    v_hook,
    z_hook,
)
from models.model.handle import ModelHandle
from models.model.softmax_terms import layer_scales
from models.progress import Progress, part, quiet


@dataclass
class AtPRuns:
    """The clean pass's values and the corrupted pass's values and gradients.

    Attributes:
        ld_clean: the clean run's logit difference (the corrupted one is ``run.ld``).
        clean: kept clean activations (CPU, float32) by hook name.
        run: the corrupted pass (:class:`~models.circuits.gradients.GradientRun`).
        source: where q and k as the softmax sees them come from; ``None`` without QK fix.
        scales: each layer's attention logit multiplier.
        rotation: per layer ``(cos, sin)`` of a rotary model (``1 pos rotary_dim``), else empty.
        qk_fix, grad_drop: the fixes these passes serve.
    """

    ld_clean: float
    clean: dict[str, torch.Tensor]
    run: GradientRun
    source: QKSource | None
    scales: tuple[float, ...]
    rotation: dict[int, tuple[torch.Tensor, torch.Tensor]]
    qk_fix: bool
    grad_drop: bool

    @property
    def gap(self) -> float:
        """``LD_clean - LD_corrupted``, what every effect is divided by."""
        return self.ld_clean - self.run.ld


def _last_row(act: torch.Tensor) -> torch.Tensor:
    return act[:, :, -1]


def _whole(act: torch.Tensor) -> torch.Tensor:
    return act


def _names(
    model: ModelHandle, source: QKSource | None, rotation: bool
) -> tuple[dict[str, Keep], dict[str, int], dict[str, Keep]]:
    """What the clean pass keeps, the corrupted pass's leaves, and what it keeps besides."""
    n_layers = model.facts.n_layers
    clean: dict[str, Keep] = {}
    leaves: dict[str, int] = {}
    keep: dict[str, Keep] = {resid_pre_hook(layer): _whole for layer in range(n_layers)}
    for layer in range(n_layers):
        inputs = [z_hook(layer), q_hook(layer), k_hook(layer), v_hook(layer)]
        rotated = qk_names(source, layer) if source is not None else []
        if rotation:
            rotated = list(dict.fromkeys([*rotated, cos_hook(layer), sin_hook(layer)]))
        clean.update(dict.fromkeys(inputs + rotated, _whole))
        clean[pattern_hook(layer)] = _last_row
        leaves.update(dict.fromkeys(inputs, layer))
        keep.update(dict.fromkeys(inputs + rotated, _whole))
        keep[pattern_hook(layer)] = _last_row
        if source is not None:
            leaves[pattern_hook(layer)] = layer
            keep[scores_hook(layer)] = _whole
    return clean, leaves, keep


def attribution_runs(
    model: ModelHandle,
    setup: Setup,
    *,
    qk_fix: bool = True,
    grad_drop: bool = False,
    hooks: Sequence[Hook] = (),
    progress: Progress = quiet,
) -> AtPRuns:
    """Run the clean prompt, then the corrupted prompt forward and backward.

    Args:
        model: a causal language model.
        setup: the prepared task.
        qk_fix: also keep scores, rotated q/k and pattern gradients.
        grad_drop: also compute the GradDrop gradients.
        hooks: forward hooks applied to both passes.
        progress: progress callback; may raise ``Cancelled``.

    Raises:
        TaskError: clean and corrupted give the same LD.
        CircuitsUnavailable: a hook is missing, or the QK fix cannot read the softmax.
    """
    source = None
    if qk_fix:
        source = qk_source(model)
        if source is None:
            raise CircuitsUnavailable(
                f"The QK fix is not available for {model.facts.name}: "
                "it exposes neither rotated q/k nor the rotation."
            )
    n_layers = model.facts.n_layers
    rotary = model.facts.positional == "rotary" and not missing_hooks(
        model, [cos_hook(0), sin_hook(0)]
    )
    clean_keep, leaves, keep = _names(model, source, rotary)
    check_hooks(model, list(clean_keep))
    progress(0.0, "the clean prompt")
    ld_clean, clean = capture(model, setup.clean_ids, setup, clean_keep, hooks)
    run = gradient_run(model, setup, leaves, keep, hooks, grad_drop, part(progress, 0.2, 0.8))
    if abs(ld_clean - run.ld) < MIN_GAP:
        raise TaskError(
            f"The clean and corrupted prompts give the same logit difference "
            f"({ld_clean:.4g}): there is nothing for a patch to restore. Choose a "
            "corruption that changes the answer."
        )
    scales = tuple(layer_scales(model)[0])
    if source is not None:
        check_scores(model, run, source, scales)
    rotation = (
        {
            layer: (run.values[cos_hook(layer)], run.values[sin_hook(layer)])
            for layer in range(n_layers)
        }
        if rotary
        else {}
    )
    return AtPRuns(
        ld_clean=ld_clean,
        clean=clean,
        run=run,
        source=source,
        scales=scales,
        rotation=rotation,
        qk_fix=qk_fix,
        grad_drop=grad_drop,
    )


def check_scores(
    model: ModelHandle, run: GradientRun, source: QKSource, scales: Sequence[float]
) -> None:
    """Raise :class:`CircuitsUnavailable` unless each layer's scores hook holds the logits the
    softmax turns into its pattern, ``scale * q k^T`` plus masks (the QK fix relies on both)."""
    for layer, scale in enumerate(scales):
        scores = run.values[scores_hook(layer)][0].double()
        row = run.values[pattern_hook(layer)][0].double()
        if (softmax(scores)[:, -1] - row).abs().max() > 1e-3:
            raise CircuitsUnavailable(
                f"The QK fix is not available for {model.facts.name}: its attention scores hook "
                "does not hold the logits of its pattern. Run AtP without the QK fix."
            )
        if model.facts.positional == "alibi":
            continue
        q, k = (t[0].double() for t in softmax_qk(run.values, layer, source))
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        raw = scale * torch.einsum("qhd,khd->hqk", q, k)
        allowed = scores > -1e30
        largest = max(1.0, float(scores[allowed].abs().max()))
        if (raw - scores)[allowed].abs().max() > 1e-3 * largest:
            raise CircuitsUnavailable(
                f"The QK fix is not available for {model.facts.name}: its attention logits are "
                "not scale * q k^T (e.g. soft-capped). Run AtP without the QK fix."
            )
