"""The eviction experiment a user runs: perplexity against the cache budget for each policy, on
a bundled passage or the user's text, with progress, Cancel and a cost estimate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from models.cost import Cost
from models.generate.cost import eviction_estimate
from models.generate.eviction import full_pass, perplexity, policy_pass, rope_shift
from models.generate.policies import POLICIES, POLICY_NAMES, Policy
from models.generate.settings import GenerationError
from models.generate.view import model_view, view_device
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from models.progress import Progress, part, quiet

DEFAULT_BUDGETS = (64, 128, 256, 512)
DEFAULT_POLICIES: tuple[Policy, ...] = ("window", "sinks", "h2o")


@dataclass(frozen=True)
class EvictionSettings:
    """What to sweep.

    Attributes:
        budgets: cache budgets: keys each query may see, itself included.
        sinks: initial tokens the ``sinks`` policy keeps (StreamingLLM uses 4).
        policies: the bounded policies to compare with the full cache.
        max_tokens: the text is cut to this many tokens (and to the model's context).
    """

    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    sinks: int = 4
    policies: tuple[Policy, ...] = DEFAULT_POLICIES
    max_tokens: int = 1024

    def problems(self) -> list[str]:
        out = []
        if not self.budgets or min(self.budgets) < 1:
            out.append("Give at least one cache budget, each a whole number of at least 1.")
        unknown = [p for p in self.policies if p not in POLICIES]
        if unknown:
            out.append(f"Unknown policy {unknown[0]!r}: choose from {', '.join(POLICIES)}.")
        if self.sinks < 0:
            out.append("The number of sink tokens cannot be negative.")
        elif "sinks" in self.policies and self.budgets and min(self.budgets) <= self.sinks:
            out.append(
                f"Every budget must exceed the {self.sinks} sink tokens (the window needs "
                f"at least one slot); the smallest is {min(self.budgets)}."
            )
        if self.max_tokens < 2:
            out.append("The text must have at least 2 tokens.")
        return out


@dataclass(frozen=True)
class EvictionPoint:
    """One run: a policy at a budget, and the perplexity it gave."""

    policy: Policy
    budget: int
    perplexity: float


@dataclass(frozen=True)
class EvictionResult:
    """The sweep's numbers.

    Attributes:
        n_tokens: tokens of the text read (after the cut).
        full_perplexity: with the whole cache.
        points: one per policy and budget, policy by policy, budgets increasing.
        sinks: sink tokens of the ``sinks`` policy.
        positions: how the ``sinks`` policy assigned positions on this model, in words.
        losses: per run (``(policy, budget)``; ``("full", n_tokens)`` for the full cache) the
            ``n_tokens - 1`` float32 next-token losses.
    """

    n_tokens: int
    full_perplexity: float
    points: tuple[EvictionPoint, ...]
    sinks: int
    positions: str
    losses: dict[tuple[str, int], np.ndarray]

    def rows(self) -> list[tuple[str, int, float]]:
        """``(policy, budget, perplexity)``: the full cache (budget = text length), then every
        run."""
        out = [("full", self.n_tokens, self.full_perplexity)]
        return out + [(p.policy, p.budget, p.perplexity) for p in self.points]

    def perplexity(self, policy: str, budget: int) -> float:
        found = [p.perplexity for p in self.points if p.policy == policy and p.budget == budget]
        if not found:
            raise KeyError((policy, budget))
        return found[0]


def bundled_passage() -> str:
    """The English passages shipped for the head finder (several thousand tokens)."""
    import models.heads

    found = sorted(Path(models.heads.__file__).parent.rglob("english.txt"))
    if not found:
        raise GenerationError("The bundled English passages are missing from this install.")
    return found[0].read_text(encoding="utf-8")


def model_passage(model: ModelHandle) -> str:
    """The text the eviction experiment reads by default: the model's own bundled corpus, one
    passage after another (held-out Python source for the bundled GPT-2, which was trained on
    Python; the English passages for every other model)."""
    from models.heads.finding.corpus import model_corpus

    if model.spec.kind != "bundled":
        return bundled_passage()
    return "\n\n".join(model_corpus(model).texts)


def positions_note(model: ModelHandle) -> str:
    if rope_shift(model) is not None:
        return (
            "positions within the cache, as StreamingLLM assigns them (RoPE: the sinks "
            "are rotated as if they sat just before the window)"
        )
    return (
        "original positions (this model has no single rotary embedding to re-index; "
        "learned position embeddings are part of each cached key)"
    )


def estimate(model: ModelHandle, n_tokens: int, settings: EvictionSettings) -> Cost:
    """Seconds and peak bytes of :func:`eviction_sweep` on ``n_tokens`` tokens."""
    return eviction_estimate(
        model.facts,
        n_tokens,
        tuple(settings.budgets),
        tuple(settings.policies),
        model.spec.device,
        model.spec.torch_dtype.itemsize,
        int(getattr(model.tokenizer, "vocab_size", 50_000) or 50_000),
    )


def eviction_sweep(
    model: ModelHandle, text: str, settings: EvictionSettings, progress: Progress = quiet
) -> EvictionResult:
    """Perplexity of ``text`` under every policy and budget in ``settings``.

    Args:
        model: a loaded causal language model.
        text: the passage (cut to ``settings.max_tokens`` and the model's context).
        settings: budgets, sinks and policies.
        progress: called per layer of every pass; may raise Cancelled.

    Raises:
        PromptError: empty text. GenerationError: bad settings, an encoder, too short a text.
    """
    problems = settings.problems()
    if not model.facts.causal:
        problems.insert(
            0,
            f"{model.facts.name} is an encoder: it does not read a text one "
            "token at a time, so it has no KV cache to evict.",
        )
    if problems:
        raise GenerationError(" ".join(problems))
    ids, _ = tokenize(model, text, settings.max_tokens)
    n = int(ids.shape[1])
    if n < 2:
        raise GenerationError("The text has fewer than 2 tokens: nothing to predict.")
    budgets = sorted({int(b) for b in settings.budgets})
    runs = [(p, b) for p in settings.policies for b in budgets]
    work = [n] + [max(n - b, 0) * (2 if p == "h2o" else 1) for p, b in runs]
    starts, total = np.cumsum([0, *work[:-1]]) / sum(work), sum(work)
    layers = model.facts.n_layers

    def per_layer(i: int, text: str) -> Callable[[int], None]:
        sub = part(progress, float(starts[i]), work[i] / total)
        return lambda layer: sub((layer + 1) / layers, f"{text}: layer {layer + 1} of {layers}")

    checkpoints = tuple(b for b in budgets if b < n) if "h2o" in settings.policies else ()
    full = full_pass(model, ids, checkpoints, per_layer(0, "full cache"))
    losses = {("full", n): full.losses.numpy()}
    points = []
    for i, (policy, budget) in enumerate(runs, start=1):
        label = f"{POLICY_NAMES[policy]}, budget {budget}"
        got = policy_pass(model, ids, policy, budget, settings.sinks, full, per_layer(i, label))
        losses[(policy, budget)] = got.numpy()
        points.append(EvictionPoint(policy, budget, perplexity(got)))
    progress(1.0, "done")
    return EvictionResult(
        n_tokens=n,
        full_perplexity=perplexity(full.losses),
        points=tuple(points),
        sinks=settings.sinks,
        positions=positions_note(model),
        losses=losses,
    )


def plain_perplexity(model: ModelHandle, ids: torch.Tensor) -> float:
    """``exp`` of the loss of a plain forward pass with labels (no cache, no policy)."""
    view = model_view(model)
    with torch.no_grad():
        out = view(input_ids=ids.to(view_device(view)), labels=ids.to(view_device(view)))
    return float(torch.exp(out.loss.to(torch.float64)))


def eviction_against_plain(
    model: ModelHandle, text: str, settings: EvictionSettings, progress: Progress = quiet
) -> tuple[EvictionResult, float]:
    """:func:`eviction_sweep` and the plain pass's perplexity of the same tokens, which the
    full-budget row must equal."""
    result = eviction_sweep(model, text, settings, progress)
    ids, _ = tokenize(model, text, settings.max_tokens)
    return result, plain_perplexity(model, ids)


def sink_verdict(result: EvictionResult) -> str:
    """What removing the sink tokens does on this text, in words, from the measured numbers."""
    budgets = sorted(
        {p.budget for p in result.points if p.policy == "window"}
        & {p.budget for p in result.points if p.policy == "sinks"}
    )
    budgets = [b for b in budgets if b < result.n_tokens]
    if not budgets:
        return "Run both the window and the sinks + window policies below the text length."
    parts = [
        f"budget {b}: {result.perplexity('window', b):,.2f} without sinks vs "
        f"{result.perplexity('sinks', b):,.2f} with {result.sinks}"
        for b in budgets
    ]
    worst = max(result.perplexity("window", b) / result.perplexity("sinks", b) for b in budgets)
    verdict = (
        "removing the sinks hurts"
        if worst > 1.5
        else "removing the sinks changes little"
        if worst < 1.1
        else "removing the sinks hurts somewhat"
    )
    return (
        f"Full cache {result.full_perplexity:,.2f}; {verdict} (at most {worst:,.1f}x): "
        + "; ".join(parts)
        + "."
    )
