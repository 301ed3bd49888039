"""How much work a corpus measurement is: which texts fit a token budget, what a pass costs,
and progress reported in units of work so that the time left can be measured, not guessed.

A pass of ``copies`` x ``n`` tokens that starts at block ``start`` costs, in parameter-token
units, ``copies * n * ((n_layers - start) * block + unembed)``, where ``block`` is one block's
parameter count and ``unembed`` the unembedding's (2 FLOPs per unit).
"""

from __future__ import annotations

from typing import Sequence

from models.heads.loss import LossTask, reference_task
from models.model.loading import LoadedModel
from models.progress import Progress

FLOPS = {"cpu": 4e10, "cuda": 2e12}  # sustained FLOP/s assumed before anything is measured


class Meter:
    """Progress in units of work (parameters x tokens), so that the fraction done is the share
    of the time spent and a rate measured on the first steps predicts the rest."""

    def __init__(self, progress: Progress, total: float) -> None:
        self.progress, self.total, self.done = progress, max(total, 1e-9), 0.0

    def step(self, cost: float, text: str) -> None:
        self.progress(min(self.done / self.total, 1.0), text)
        self.done += cost


def unit_costs(model: LoadedModel) -> tuple[float, float]:
    """Relative cost per token of one block and of the unembedding (parameter counts)."""
    d_vocab = int(getattr(model.bridge.cfg, "d_vocab", 0) or 0)
    unembed = float(d_vocab * model.facts.d_model)
    body = max(model.facts.n_params - unembed, 0.5 * model.facts.n_params)
    return body / model.facts.n_layers, unembed


def pass_cost(model: LoadedModel, n_tokens: int, start: int = 0, copies: int = 1) -> float:
    """Work of a pass of ``copies`` x ``n_tokens`` tokens that starts at block ``start``."""
    block, unembed = unit_costs(model)
    return copies * n_tokens * ((model.facts.n_layers - start) * block + unembed)


def corpus_tasks(model: LoadedModel, texts: Sequence[str], max_tokens: int | None = None
                 ) -> list[LossTask]:
    """The loss task of every text (cut to ``max_tokens``)."""
    return [reference_task(model, text, max_tokens=max_tokens) for text in texts]


def default_budget(model: LoadedModel) -> int:
    """Tokens the ablation runs on by default: 1,024 for a small model, 512 for a larger one."""
    return 1024 if model.facts.n_total_heads <= 48 else 512


def budget_tasks(model: LoadedModel, texts: Sequence[str], budget: int,
                 max_tokens: int | None = None, min_tokens: int = 16) -> list[LossTask]:
    """Loss tasks of the first texts that fit in ``budget`` tokens (special tokens counted).

    The last text is cut to what is left, unless fewer than ``min_tokens`` are; the first text
    is always used.
    """
    tasks: list[LossTask] = []
    left = budget
    for text in texts:
        cap = min(left, max_tokens or left)
        if tasks and cap < min_tokens:
            break
        task = reference_task(model, text, max_tokens=max(cap, 2))
        tasks.append(task)
        left -= int(task.ids.shape[1])
        if left <= 0:
            break
    return tasks


def seconds_for(model: LoadedModel, work: float) -> float:
    """A first guess at the time ``work`` units take (2 FLOPs per parameter and token); the
    progress panel replaces it with the rate it measures once the work has started."""
    return 2.0 * work / FLOPS.get(model.spec.device, FLOPS["cpu"])
