"""The loss a pruning measurement watches: one task per text, and the texts a token budget holds.

Causal models: next-token cross-entropy, averaged over every position that has a next token.
Encoders: masked-token cross-entropy on a seeded 15 % of the ordinary tokens, each replaced by
the mask token -- but only when the checkpoint ships trained masked-LM head weights. The loader
builds encoders as ``...ForMaskedLM``; when the checkpoint has no head (all-MiniLM-L6-v2 is a
sentence-embedding checkpoint) that head is random, its loss means nothing, and we say so
instead of showing a number. The decision reads the checkpoint's tensor names, not the model.

A corpus becomes one task per text (:func:`corpus_tasks`), or the first texts that fit a token
budget (:func:`budget_tasks`), which is what the ablation's cost grows with.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int

from models.errors import UserError
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from models.model.spec import ModelSpec

LossKind = Literal["next_token", "masked_token"]
IGNORE = -100
MASK_RATE = 0.15
# Tensor-name fragments of trained masked-LM heads (BERT, RoBERTa, DistilBERT, ELECTRA, ALBERT).
MLM_HEAD_KEYS = (
    "cls.predictions.",
    "lm_head.",
    "vocab_transform.",
    "vocab_projector.",
    "generator_predictions.",
    "predictions.dense.",
)
CHECKPOINT_FILES = (
    "model.safetensors.index.json",
    "model.safetensors",
    "pytorch_model.bin.index.json",
)


class LossUnavailable(UserError):
    """No meaningful loss exists for this model; ``str(err)`` says why, for the user."""

    level = "info"


@dataclass(frozen=True)
class LossTask:
    """What to feed the model and what to score.

    Attributes:
        ids: ``1 pos`` input ids (with mask tokens for a masked-token task).
        labels: ``1 pos`` target id per position, ``-100`` where nothing is scored.
        kind: next-token or masked-token loss.
        n_tokens_full: the text's length in tokens before any cut to the context.
    """

    ids: Int[torch.Tensor, "1 pos"]
    labels: Int[torch.Tensor, "1 pos"]
    kind: LossKind
    n_tokens_full: int

    @property
    def n_targets(self) -> int:
        return int((self.labels != IGNORE).sum())


def _checkpoint_keys(path: Path) -> set[str] | None:
    if path.name.endswith(".index.json"):
        return set(json.loads(path.read_text(encoding="utf-8")).get("weight_map", {}))
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        return set(handle.keys())


def _checkpoint_file(spec: ModelSpec) -> Path | None:
    if spec.kind == "hub":
        from huggingface_hub import try_to_load_from_cache

        for name in CHECKPOINT_FILES:
            found = try_to_load_from_cache(spec.path_or_name, name)
            if isinstance(found, str):
                return Path(found)
        return None
    folder = Path(spec.path_or_name)
    return next((folder / n for n in CHECKPOINT_FILES if (folder / n).is_file()), None)


def mlm_head_in_checkpoint(spec: ModelSpec) -> bool | None:
    """Whether the saved weights include a masked-LM head; ``None`` when they cannot be read."""
    path = _checkpoint_file(spec)
    if path is None:
        return None
    try:
        keys = _checkpoint_keys(path)
    except (OSError, ValueError):
        return None
    if keys is None:
        return None
    return any(fragment in key for key in keys for fragment in MLM_HEAD_KEYS)


def loss_kind(model: ModelHandle) -> LossKind:
    """The loss that makes sense for ``model``.

    Raises:
        LossUnavailable: an encoder without a mask token or without trained head weights.
    """
    if model.facts.causal:
        return "next_token"
    name = model.facts.name
    if getattr(model.tokenizer, "mask_token_id", None) is None:
        raise LossUnavailable(
            f"Not available for {name}: an encoder without a mask token has no masked-token loss."
        )
    if not model.facts.architecture.endswith("ForMaskedLM"):
        raise LossUnavailable(
            f"Not available for {name}: it was not loaded with a masked-language-model head."
        )
    present = mlm_head_in_checkpoint(model.spec)
    if present is None:
        raise LossUnavailable(
            f"Not available for {name}: its checkpoint could not be read to "
            "confirm it ships masked-LM head weights."
        )
    if not present:
        raise LossUnavailable(
            f"Not available for {name}: its checkpoint has no masked-language-model head, so "
            "the head the loader attaches is random and its loss would mean nothing."
        )
    return "masked_token"


def _masked(model: ModelHandle, ids: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    special = set(getattr(model.tokenizer, "all_special_ids", []) or [])
    candidates = [i for i, t in enumerate(ids[0].tolist()) if t not in special]
    if not candidates:
        raise LossUnavailable("The reference text has no ordinary tokens to mask.")
    count = max(1, round(MASK_RATE * len(candidates)))
    gen = torch.Generator().manual_seed(seed)
    chosen = torch.tensor(candidates)[torch.randperm(len(candidates), generator=gen)[:count]]
    labels = torch.full_like(ids, IGNORE)
    labels[0, chosen] = ids[0, chosen]
    inputs = ids.clone()
    inputs[0, chosen] = int(model.tokenizer.mask_token_id)
    return inputs, labels


def reference_task(
    model: ModelHandle, text: str, seed: int = 0, max_tokens: int | None = None
) -> LossTask:
    """The loss task for ``text`` on ``model`` (cut to the model's context, or ``max_tokens``).

    Raises:
        LossUnavailable: no meaningful loss for this model or this text.
        models.errors.PromptError: empty or oversized text.
    """
    kind = loss_kind(model)
    ids, n_full = tokenize(model, text, max_tokens)
    if kind == "next_token":
        if ids.shape[1] < 2:
            raise LossUnavailable("The reference text needs at least two tokens.")
        labels = torch.full_like(ids, IGNORE)
        labels[:, :-1] = ids[:, 1:]
        return LossTask(ids=ids, labels=labels, kind=kind, n_tokens_full=n_full)
    inputs, labels = _masked(model, ids, seed)
    return LossTask(ids=inputs, labels=labels, kind=kind, n_tokens_full=n_full)


def loss_from_logits(
    logits: Float[torch.Tensor, "batch pos d_vocab"], labels: Int[torch.Tensor, "batch pos"]
) -> Float[torch.Tensor, ""]:
    """Mean cross-entropy over the scored positions, in float32.

    Args:
        logits: ``batch pos d_vocab``.
        labels: ``batch pos`` targets, ``-100`` where not scored.
    """
    flat = logits.reshape(-1, logits.shape[-1]).float()
    return F.cross_entropy(flat, labels.reshape(-1).to(flat.device), ignore_index=IGNORE)


def row_losses(
    logits: Float[torch.Tensor, "batch pos d_vocab"], labels: Int[torch.Tensor, "batch pos"]
) -> Float[torch.Tensor, " batch"]:
    """Mean cross-entropy of each batch row over its scored positions, float32 on CPU.

    Args:
        logits: ``batch pos d_vocab``.
        labels: ``1 pos`` or ``batch pos`` targets, ``-100`` where not scored.

    Returns:
        ``batch`` losses; row ``b`` equals :func:`loss_from_logits` of ``logits[b:b+1]``.
    """
    labels = labels.to(logits.device).expand(logits.shape[0], -1)
    return torch.stack(
        [
            loss_from_logits(logits[b : b + 1], labels[b : b + 1]).detach().cpu()
            for b in range(logits.shape[0])
        ]
    )


# --- a corpus as tasks --------------------------------------------------------------------------


def corpus_tasks(
    model: ModelHandle, texts: Sequence[str], max_tokens: int | None = None
) -> list[LossTask]:
    """The loss task of every text (cut to ``max_tokens``)."""
    return [reference_task(model, text, max_tokens=max_tokens) for text in texts]


def default_budget(model: ModelHandle) -> int:
    """Tokens the ablation runs on by default: 1,024 for a small model, 512 for a larger one."""
    return 1024 if model.facts.n_total_heads <= 48 else 512


def budget_tasks(
    model: ModelHandle,
    texts: Sequence[str],
    budget: int,
    max_tokens: int | None = None,
    min_tokens: int = 16,
) -> list[LossTask]:
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
