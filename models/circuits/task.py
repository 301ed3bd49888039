"""A patching task: a clean and a corrupted prompt of equal token length, an answer and a wrong
token, and the metric LD = logit(answer) - logit(wrong) at the last position.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from models.errors import UserError
from models.model.forward import piece_ids, tokenize
from models.model.handle import ModelHandle
from models.model.tokens import readable_tokens

SHOWN_TOKENS = 12


class TaskError(UserError):
    """The clean/corrupted pair or the answer tokens cannot be used; the text says why."""


class CircuitsUnavailable(UserError):
    """The model has no next-token logits to measure a logit difference on."""

    level = "warning"


@dataclass(frozen=True)
class CircuitTask:
    """What the user types: two prompts and two candidate next tokens (as text)."""

    clean: str
    corrupted: str
    answer: str
    wrong: str


@dataclass(frozen=True)
class Setup:
    """A checked task, tokenised.

    Attributes:
        clean_ids, corrupted_ids: ``1 pos`` token ids, the same length.
        answer_id, wrong_id: the two tokens compared at the last position.
        tokens: readable labels of the clean prompt's tokens.
        corrupted_tokens: readable labels of the corrupted prompt's tokens.
        answer_label, wrong_label: readable labels of the two tokens.
        notes: what was adjusted (e.g. a leading space added to the answer).
    """

    clean_ids: torch.Tensor
    corrupted_ids: torch.Tensor
    answer_id: int
    wrong_id: int
    tokens: tuple[str, ...]
    corrupted_tokens: tuple[str, ...]
    answer_label: str
    wrong_label: str
    notes: tuple[str, ...] = ()

    @property
    def n_tokens(self) -> int:
        return int(self.clean_ids.shape[1])


def logit_diff(logits: torch.Tensor, answer_id: int, wrong_id: int) -> torch.Tensor:
    """``logit(answer) - logit(wrong)`` at the last position of each batch row.

    Args:
        logits: ``batch pos d_vocab``.

    Returns:
        ``batch`` float64 on CPU.
    """
    last = logits[:, -1].detach().to("cpu", torch.float64)
    return last[:, answer_id] - last[:, wrong_id]


def brief(labels: list[str] | tuple[str, ...], start: int = 0) -> str:
    """Tokens from ``start`` on as ``[…|a|b|c|…]`` for a message, at most a dozen."""
    stop = start + SHOWN_TOKENS
    shown = "|".join(labels[start:stop])
    return f"[{'…|' if start else ''}{shown}{'|…' if len(labels) > stop else ''}]"


def first_difference(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """The first position where two token lists differ (the shorter length if one is a prefix)."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def check_model(model: ModelHandle) -> None:
    """Raise :class:`CircuitsUnavailable` for a model without next-token logits."""
    if not model.facts.causal:
        raise CircuitsUnavailable(
            f"Not available for {model.facts.name}: the logit difference is read at the last "
            "position of a causal language model, and this is a bidirectional encoder."
        )


def one_token(model: ModelHandle, text: str, role: str) -> tuple[int, str | None]:
    """The single token ``text`` stands for, and a note when a leading space was added.

    Raises:
        TaskError: empty text, or neither ``text`` nor ``" " + text`` is one token.
    """
    if not text:
        raise TaskError(
            f"The {role} is empty: type the token the model should (or should not) "
            "predict next, e.g. ' Mary'."
        )
    ids = piece_ids(model, text)
    if len(ids) == 1:
        return ids[0], None
    if not text.startswith(" "):
        spaced = piece_ids(model, " " + text)
        if len(spaced) == 1:
            label = readable_tokens(model.tokenizer, spaced)[0]
            return spaced[0], (
                f"The {role} {text!r} is {len(ids)} tokens; using the single "
                f"token {label!r} (with a leading space) instead."
            )
    labels = readable_tokens(model.tokenizer, ids)
    raise TaskError(
        f"The {role} {text!r} is {len(ids)} tokens {brief(labels)}, not one: the "
        f"logit difference compares two single next tokens. Pick a shorter word "
        f"(often with a leading space, like ' Mary')."
    )


def prepare(model: ModelHandle, task: CircuitTask) -> Setup:
    """Tokenise and check ``task`` on ``model``.

    Raises:
        CircuitsUnavailable: the model is not a causal language model.
        models.errors.PromptError: an empty or oversized prompt.
        TaskError: lengths differ, a prompt is cut to the context, an answer is not one token,
            or answer and wrong are the same token.
    """
    check_model(model)
    clean, n_clean = tokenize(model, task.clean)
    corrupted, n_corrupted = tokenize(model, task.corrupted)
    limit = model.facts.n_ctx
    if max(n_clean, n_corrupted) > limit:
        raise TaskError(
            f"The prompts are {n_clean} and {n_corrupted} tokens; "
            f"{model.facts.name} reads at most {limit}. Shorten them."
        )
    labels = tuple(readable_tokens(model.tokenizer, clean[0].tolist()))
    corrupted_labels = tuple(readable_tokens(model.tokenizer, corrupted[0].tolist()))
    if n_clean != n_corrupted:
        at = max(0, first_difference(labels, corrupted_labels) - 2)
        raise TaskError(
            f"The clean prompt is {n_clean} tokens and the corrupted prompt {n_corrupted}: "
            "patching moves each head's output position by position, so both must have the "
            f"same number of tokens. From token {at} on, clean: {brief(labels, at)}; "
            f"corrupted: {brief(corrupted_labels, at)}. Swap words that are one token each."
        )
    if torch.equal(clean, corrupted):
        raise TaskError(
            "The clean and corrupted prompts are the same tokens: patching one into "
            "the other changes nothing. Change a word in the corrupted prompt."
        )
    answer, answer_note = one_token(model, task.answer, "answer")
    wrong, wrong_note = one_token(model, task.wrong, "wrong token")
    if answer == wrong:
        raise TaskError(
            "The answer and the wrong token are the same token: their logit difference is always 0."
        )
    answer_label, wrong_label = readable_tokens(model.tokenizer, [answer, wrong])
    return Setup(
        clean_ids=clean,
        corrupted_ids=corrupted,
        answer_id=answer,
        wrong_id=wrong,
        tokens=labels,
        corrupted_tokens=corrupted_labels,
        answer_label=answer_label,
        wrong_label=wrong_label,
        notes=tuple(n for n in (answer_note, wrong_note) if n),
    )


def visible(text: str) -> str:
    """``text`` with each space shown as ``␣`` (how token labels show it), so that ``' Mary'``
    and ``'Mary'`` look different."""
    return text.replace(" ", "␣")


def missing_space(model: ModelHandle, text: str, prompt: str) -> str | None:
    """The space-prefixed form of a typed answer when the model almost surely means it.

    After a prompt that ends in a word or punctuation (no trailing whitespace), the next word
    comes as one token *with* its leading space (``' Mary'``); the bare word (``'Mary'``) is
    another token, one the model rarely predicts there, so an LD on it measures something else
    without any error. Returns ``" " + text`` when ``text`` has no leading whitespace, is one
    token on its own, ``" " + text`` is one (other) token, and ``prompt`` does not end in
    whitespace; else None. (A bare word that is several tokens is already replaced by its
    spaced form, with a note, by :func:`one_token`.)
    """
    if not text or text[0].isspace() or not prompt or prompt[-1].isspace():
        return None
    bare, spaced = piece_ids(model, text), piece_ids(model, " " + text)
    if len(bare) == 1 and len(spaced) == 1 and bare != spaced:
        return " " + text
    return None
