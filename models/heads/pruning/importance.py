"""Pruning importance over a corpus, measured in batches that resume from the clean run.

Per text, one clean pass stores every block's output. An ablated run of the heads of layer
``l`` cannot differ from the clean run before block ``l``, so it starts there
(:func:`models.model.resume.run_resumed`): several ablated runs go in one batch, copy ``i``
with its own heads ablated at ``hook_z``. Each copy's loss is the mean cross-entropy over its
text, exactly what :func:`models.heads.pruning.ablation.ablated_loss` measures one whole pass at
a time.

Every text counts once: the corpus importance of a head is the mean over texts of its loss
change on each text, with the spread of :mod:`models.heads.finding.spread`. Mean-ablation
replaces a head's ``hook_z`` by its mean over every position of every text of the corpus. A
one-text corpus is the command line's importance on one text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float

from models.cost import Cost
from models.head import Head, all_heads
from models.heads.cost import (
    FLOAT_BYTES,
    RESIDUAL_COPIES,
    Meter,
    forward_peak_bytes,
    layer_pattern_bytes,
    pass_cost,
    work_cost,
)
from models.heads.finding.spread import Spread, spread
from models.heads.names import ABLATION_METHODS, AblationMethod, Ranking
from models.heads.pruning.ablation import check_hooks, copy_hooks, first_layer, mask_gradient
from models.heads.pruning.loss import LossTask, row_losses
from models.model.forward import every_layer, run_hooks, z_hook
from models.model.handle import ModelHandle
from models.model.resume import clean_pass, run_resumed
from models.progress import Progress, quiet

TOKENS_PER_BATCH = 1024
Mask = Sequence[tuple[int, int]]  # the heads one copy ablates together


@dataclass(frozen=True)
class CleanText:
    """One text's clean run: its task, its loss and every block's output (to resume from)."""

    task: LossTask
    loss: float
    outputs: list[torch.Tensor] | None


def clean_text(model: ModelHandle, task: LossTask) -> CleanText:
    """The clean pass of one text, keeping every block's output to resume from."""
    logits, _, outputs = clean_pass(model, task.ids)
    return CleanText(task, float(row_losses(logits, task.labels)[0]), outputs)


def ablated_losses(
    model: ModelHandle,
    clean: CleanText,
    masks: Sequence[Iterable[tuple[int, int]]],
    method: AblationMethod = "zero",
    means: Float[torch.Tensor, "layer head_index d_head"] | None = None,
) -> Float[np.ndarray, " copies"]:
    """Loss of each copy in one batched pass; ``masks[i]`` are the heads copy ``i`` ablates."""
    rows = [list(m) for m in masks]
    start = first_layer(rows, model.facts.n_layers)
    if start >= model.facts.n_layers:
        return np.full(len(rows), clean.loss)
    logits = run_resumed(
        model,
        clean.task.ids,
        copy_hooks(rows, method, means),
        start,
        clean.outputs,
        copies=len(rows),
    )
    return row_losses(logits, clean.task.labels).double().numpy()


def batches(masks: Sequence[Mask], n_tokens: int) -> list[list[int]]:
    """Indices of ``masks`` in batches of at most ``TOKENS_PER_BATCH`` tokens, by first layer."""
    size = max(1, TOKENS_PER_BATCH // max(n_tokens, 1))
    order = sorted(range(len(masks)), key=lambda i: first_layer([masks[i]], 10**9))
    return [order[i : i + size] for i in range(0, len(order), size)]


def run_masks(
    model: ModelHandle,
    clean: CleanText,
    masks: Sequence[Mask],
    method: AblationMethod,
    means: torch.Tensor | None,
    meter: Meter,
    label: str,
) -> np.ndarray:
    """Loss under every mask, batch by batch, reporting to ``meter``."""
    n_tokens = clean.task.ids.shape[1]
    out = np.zeros(len(masks))
    for rows in batches(masks, n_tokens):
        chosen = [masks[i] for i in rows]
        start = first_layer(chosen, model.facts.n_layers)
        meter.step(pass_cost(model, n_tokens, start, len(rows)), label)
        out[rows] = ablated_losses(model, clean, chosen, method, means)
    return out


def plan_cost(model: ModelHandle, masks: Sequence[Mask], n_tokens: int) -> float:
    """Work units of :func:`run_masks` over one text of ``n_tokens`` tokens."""
    return sum(
        pass_cost(
            model, n_tokens, first_layer([masks[i] for i in rows], model.facts.n_layers), len(rows)
        )
        for rows in batches(masks, n_tokens)
    )


def corpus_means(
    model: ModelHandle, tasks: Sequence[LossTask], meter: Meter | None = None
) -> Float[torch.Tensor, "layer head_index d_head"]:
    """Every head's ``hook_z`` averaged over every position of every text.

    Returns:
        ``layer head_index d_head`` float32 on CPU.
    """
    names = every_layer(z_hook, model.facts.n_layers)
    total: torch.Tensor | None = None
    count = 0
    for t, task in enumerate(tasks):
        if meter is not None:
            meter.step(pass_cost(model, task.ids.shape[1]), f"head means: text {t + 1}")
        acts = run_hooks(model, task.ids, names)
        sums = torch.stack([acts[name].sum(dim=(0, 1)) for name in names])
        total = sums if total is None else total + sums
        count += task.ids.shape[1]
    if total is None:
        raise ValueError("head means need at least one text")
    return total / count


def single_heads(model: ModelHandle) -> list[list[Head]]:
    """One mask per head, in ``L.H`` order."""
    return [[head] for head in all_heads(model.facts.n_layers, model.facts.n_heads)]


@dataclass(frozen=True)
class CorpusImportance:
    """Every head's pruning importance over a corpus.

    Attributes:
        spreads: ``zero`` / ``mean`` (loss change when the head alone is ablated),
            ``gradient`` (``|dL/dxi|``) and ``first_order`` (``-dL/dxi``, the first-order
            estimate of the zero-ablation loss change), each over texts.
        base_losses: each text's clean loss.
        means: ``layer head_index d_head`` corpus means used for mean-ablation (or None).
        kind: ``next_token`` or ``masked_token``.
        n_targets: scored tokens over the whole corpus.
    """

    spreads: dict[Ranking, Spread]
    base_losses: np.ndarray
    means: torch.Tensor | None
    kind: str
    n_targets: int

    @property
    def base_loss(self) -> float:
        return float(np.mean(self.base_losses))

    @property
    def n_texts(self) -> int:
        return len(self.base_losses)

    def ranking(self, by: Ranking) -> np.ndarray:
        """``layer head_index`` means of one measure; NaN where it was not measured."""
        if by not in self.spreads:
            first = next(iter(self.spreads.values())).mean
            return np.full(first.shape, np.nan)
        return self.spreads[by].mean

    @property
    def zero(self) -> np.ndarray:
        return self.ranking("zero")

    @property
    def mean(self) -> np.ndarray:
        return self.ranking("mean")

    @property
    def gradient(self) -> np.ndarray:
        return self.ranking("gradient")

    @property
    def first_order(self) -> np.ndarray:
        return self.ranking("first_order")


def masks_peak_bytes(model: ModelHandle, n_tokens: int) -> int:
    """Bytes :func:`run_masks` needs on one text: its stored block outputs and one batch of
    copies resumed from them (:func:`models.heads.cost.forward_peak_bytes`)."""
    facts = model.facts
    copies = max(1, TOKENS_PER_BATCH // max(n_tokens, 1))
    stored = facts.n_layers * n_tokens * facts.d_model * FLOAT_BYTES
    return stored + forward_peak_bytes(facts, facts.d_vocab, n_tokens, copies)


def gradient_peak_bytes(model: ModelHandle, n_tokens: int) -> int:
    """Bytes :func:`mask_gradient` needs on one text: the backward pass keeps every layer's
    attention (two pattern-sized tensors) and residual-stream activations, and the logits
    with their gradient."""
    facts = model.facts
    per_layer = (
        2 * layer_pattern_bytes(facts, n_tokens)
        + RESIDUAL_COPIES * n_tokens * facts.d_model * FLOAT_BYTES
    )
    return facts.n_layers * per_layer + 2 * n_tokens * facts.d_vocab * FLOAT_BYTES


def importance_estimate(model: ModelHandle, sizes: Sequence[int], methods: Sequence[str]) -> Cost:
    """The cost of :func:`measure_corpus_importance` on texts of ``sizes`` tokens, before it
    runs (the longest text sets the peak)."""
    longest = max(sizes, default=1)
    peak = masks_peak_bytes(model, longest)
    if "gradient" in methods:
        peak = max(peak, gradient_peak_bytes(model, longest))
    return work_cost(model, importance_work(model, sizes, methods), peak)


def curve_estimate(model: ModelHandle, sizes: Sequence[int], n_points: int) -> Cost:
    """The cost of :func:`pruning_curve` with ``n_points`` head sets."""
    work = sum(pass_cost(model, n) + pass_cost(model, n, copies=n_points) for n in sizes)
    return work_cost(model, work, masks_peak_bytes(model, max(sizes, default=1)))


def importance_work(model: ModelHandle, sizes: Sequence[int], methods: Sequence[str]) -> float:
    """Work units of :func:`measure_corpus_importance` on texts of ``sizes`` tokens."""
    masks = single_heads(model)
    ablate = sum(m in methods for m in ("zero", "mean"))
    total = sum(
        pass_cost(model, n) * (1 + 3 * ("gradient" in methods))
        + ablate * plan_cost(model, masks, n)
        for n in sizes
    )
    return total + (sum(pass_cost(model, n) for n in sizes) if "mean" in methods else 0.0)


def measure_corpus_importance(
    model: ModelHandle,
    tasks: Sequence[LossTask],
    methods: Sequence[str] = ("zero", "mean", "gradient"),
    progress: Progress = quiet,
) -> CorpusImportance:
    """Single-head ablation effects (and the mask gradient) on every text.

    Args:
        model: a loaded model.
        tasks: from :func:`models.heads.pruning.loss.corpus_tasks` or ``budget_tasks``.
        methods: any of ``zero``, ``mean``, ``gradient`` (the last also gives ``first_order``).
        progress: ``progress(fraction, text)`` in proportion to the work done.

    Raises:
        LossUnavailable: the model exposes no ``hook_z``.
    """
    check_hooks(model)
    shape = (len(tasks), model.facts.n_layers, model.facts.n_heads)
    masks = single_heads(model)
    ablate = [m for m in ABLATION_METHODS if m in methods]
    sizes = [task.ids.shape[1] for task in tasks]
    meter = Meter(progress, importance_work(model, sizes, methods))
    means = corpus_means(model, tasks, meter) if "mean" in methods else None
    measured: list[Ranking] = [*ablate]
    if "gradient" in methods:
        measured += ["gradient", "first_order"]
    per_text = {name: np.full(shape, np.nan) for name in measured}
    base = np.zeros(len(tasks))
    for t, task in enumerate(tasks):
        where = f"text {t + 1} of {len(tasks)}"
        meter.step(pass_cost(model, sizes[t]), f"clean run, {where}")
        clean = clean_text(model, task)
        base[t] = clean.loss
        for method in ablate:
            losses = run_masks(
                model, clean, masks, method, means, meter, f"{method}-ablating every head, {where}"
            )
            per_text[method][t] = (losses - clean.loss).reshape(shape[1:])
        if "gradient" in methods:
            meter.step(3 * pass_cost(model, sizes[t]), f"gradient through a head mask, {where}")
            grad, _ = mask_gradient(model, task)
            per_text["gradient"][t], per_text["first_order"][t] = np.abs(grad), -grad
    progress(1.0, "done")
    return CorpusImportance(
        spreads={k: spread(v) for k, v in per_text.items()},
        base_losses=base,
        means=means,
        kind=tasks[0].kind,
        n_targets=sum(task.n_targets for task in tasks),
    )


def corpus_losses(
    model: ModelHandle,
    tasks: Sequence[LossTask],
    masks: Sequence[Mask],
    method: AblationMethod = "zero",
    means: torch.Tensor | None = None,
    progress: Progress = quiet,
) -> np.ndarray:
    """Mean over texts of the loss with each mask's heads ablated together.

    Returns:
        ``len(masks)`` losses; an empty mask gives the clean corpus loss.
    """
    sizes = [task.ids.shape[1] for task in tasks]
    meter = Meter(progress, sum(pass_cost(model, n) + plan_cost(model, masks, n) for n in sizes))
    out = np.zeros((len(tasks), len(masks)))
    for t, task in enumerate(tasks):
        meter.step(pass_cost(model, sizes[t]), f"clean run, text {t + 1} of {len(tasks)}")
        clean = clean_text(model, task)
        out[t] = run_masks(
            model,
            clean,
            masks,
            method,
            means,
            meter,
            f"{method}-ablating head sets, text {t + 1} of {len(tasks)}",
        )
    progress(1.0, "done")
    mean: np.ndarray = out.mean(axis=0)
    return mean


def curve_points(n_heads: int, most: int = 17) -> list[int]:
    """The ``k`` of a pruning curve: every ``k`` up to 48 heads, else ``most`` spaced points."""
    if n_heads <= 48:
        return list(range(n_heads + 1))
    return sorted({int(k) for k in np.linspace(0, n_heads, most).round()})


def pruning_curve(
    model: ModelHandle,
    tasks: Sequence[LossTask],
    order: Sequence[Head],
    method: AblationMethod = "zero",
    means: torch.Tensor | None = None,
    progress: Progress = quiet,
) -> tuple[list[int], np.ndarray]:
    """Corpus loss with the first ``k`` heads of ``order`` ablated together, for each ``k`` of
    :func:`curve_points`; every point is its own pass, not a sum of single-head effects."""
    ks = curve_points(len(order))
    return ks, corpus_losses(model, tasks, [list(order[:k]) for k in ks], method, means, progress)
