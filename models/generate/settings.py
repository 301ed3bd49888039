"""What to generate: the settings a link carries, their checks, and the prompt as the model reads
it (optionally wrapped in the model's chat template)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

import torch
from jaxtyping import Int

from models.errors import PromptError, UserError
from models.model.forward import tokenize
from models.model.handle import ModelHandle

Decoding = Literal["greedy", "sample"]
DECODINGS: tuple[str, ...] = get_args(Decoding)
MAX_NEW_TOKENS = 4096
# Sampling temperatures the sampler can divide float32 logits by without overflowing them to
# inf (a link's temp=1e-300 would): below the lower bound sampling is greedy in all but name.
TEMPERATURE_RANGE = (0.01, 100.0)


class GenerationError(UserError):
    """The generation cannot run as asked (settings, model, prompt length)."""


@dataclass(frozen=True)
class GenerationSettings:
    """How the model writes; everything a shared link needs to reproduce a generation.

    Attributes:
        max_new_tokens: the most tokens to write (fewer when the model ends its text).
        chat: wrap the prompt in the model's chat template (instruct models).
        decoding: ``"greedy"`` (the most likely token every step) or ``"sample"``.
        temperature: divides the logits before sampling (sampling only; above 0).
        top_k: sample among the ``top_k`` most likely tokens only; None or 0 = all.
        top_p: sample from the smallest set of tokens holding at least this probability
            (nucleus sampling; 1 = all).
        seed: seed of the sampler's ``torch.Generator``; None draws one (recorded in the result).
    """

    max_new_tokens: int = 32
    chat: bool = False
    decoding: Decoding = "greedy"
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    seed: int | None = None

    @property
    def sampling(self) -> bool:
        return self.decoding == "sample"

    def problems(self) -> list[str]:
        """Messages for the user; empty when the settings are usable on any model."""
        out = []
        if self.decoding not in DECODINGS:
            out.append(f"Decoding must be one of {', '.join(DECODINGS)}, not {self.decoding!r}.")
        if not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            out.append(
                f"The number of new tokens must be between 1 and {MAX_NEW_TOKENS:,}; "
                f"got {self.max_new_tokens}."
            )
        low, high = TEMPERATURE_RANGE
        if self.sampling and not low <= self.temperature <= high:
            out.append(
                f"Sampling needs a temperature between {low:g} and {high:g} (got "
                f"{self.temperature:g}); for the single most likely token every step choose "
                "greedy decoding."
            )
        if self.top_k is not None and self.top_k < 0:
            out.append(f"top-k must be 0 (off) or a positive whole number; got {self.top_k}.")
        if not 0.0 < self.top_p <= 1.0:
            out.append(f"top-p must lie in (0, 1]; got {self.top_p:g}.")
        return out

    def with_seed(self, seed: int) -> GenerationSettings:
        return replace(self, seed=seed)

    def to_params(self) -> dict[str, str]:
        """Query parameters that reproduce these settings (sampler keys only when sampling)."""
        out = {
            "n": str(self.max_new_tokens),
            "chat": "1" if self.chat else "0",
            "decoding": self.decoding,
        }
        if self.sampling:
            out.update(
                {
                    "temp": f"{self.temperature:g}",
                    "top_k": str(self.top_k or 0),
                    "top_p": f"{self.top_p:g}",
                }
            )
            if self.seed is not None:
                out["seed"] = str(self.seed)
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> tuple[GenerationSettings, list[str]]:
        """Settings from query parameters; what cannot be read keeps its default, with a note
        (out-of-range values are left for :meth:`problems` to explain)."""
        notes: list[str] = []
        fields: dict[str, Any] = {}
        for key, name, kind in (
            ("n", "max_new_tokens", int),
            ("temp", "temperature", float),
            ("top_k", "top_k", int),
            ("top_p", "top_p", float),
            ("seed", "seed", int),
        ):
            if key in params:
                try:
                    value = kind(str(params[key]).strip())
                except ValueError:
                    value = None
                if value is None or not math.isfinite(value):
                    notes.append(f"Ignored {key}={params[key]!r} in the link: not a number.")
                else:
                    fields[name] = value
        if fields.get("top_k") == 0:
            fields["top_k"] = None  # 0 is how a link writes "off"
        if "chat" in params:
            fields["chat"] = str(params["chat"]).strip().lower() in ("1", "true", "yes", "on")
        decoding = str(params.get("decoding", "greedy")).strip().lower()
        if decoding in DECODINGS:
            fields["decoding"] = decoding
        else:
            notes.append(f"Ignored decoding={decoding!r} in the link: it is greedy or sample.")
        return cls(**fields), notes


@dataclass(frozen=True)
class Prompt:
    """The prompt as the model reads it.

    Attributes:
        text: what the user typed.
        templated: the text after the chat template (None without ``chat``): show it on the page.
        ids: ``batch pos`` token ids fed to the model (batch 1).
        n_full: tokens of the whole prompt (equal to ``ids.shape[1]`` unless it was cut).
    """

    text: str
    templated: str | None
    ids: Int[torch.Tensor, "batch pos"]
    n_full: int


def chat_text(model: ModelHandle, prompt: str) -> str:
    """``prompt`` as one user turn in the model's chat template, ready for the answer.

    Raises:
        GenerationError: the tokenizer has no chat template.
    """
    tok = model.tokenizer
    if not getattr(tok, "chat_template", None):
        raise GenerationError(
            f"{model.facts.name} has no chat template: turn chat off to "
            "continue the prompt as plain text."
        )
    return str(
        tok.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )
    )


def prepare_prompt(model: ModelHandle, prompt: str, chat: bool) -> Prompt:
    """Token ids for ``prompt``: as the explorer tokenizes it, or through the chat template (whose
    text already holds every special token, so the tokenizer adds none).

    Raises:
        PromptError: empty prompt.
        GenerationError: no chat template.
    """
    if not prompt or not prompt.strip():
        raise PromptError("The prompt is empty: type some text for the model to continue.")
    if not chat:
        ids, n_full = tokenize(model, prompt)
        return Prompt(prompt, None, ids, n_full)
    templated = chat_text(model, prompt)
    pieces = list(model.tokenizer(templated, add_special_tokens=False)["input_ids"])
    ids = torch.tensor([pieces], dtype=torch.long)
    return Prompt(prompt, templated, ids, len(pieces))


def check(model: ModelHandle, settings: GenerationSettings, n_prompt: int) -> None:
    """Refuse what cannot run, with a message for the user.

    Raises:
        GenerationError: bad settings, an encoder, or prompt + new tokens over the context.
    """
    if not model.facts.causal:
        raise GenerationError(
            f"{model.facts.name} is an encoder (it reads the whole text at "
            "once and has no next-token head): it cannot generate text. "
            "Load a decoder such as SmolLM2."
        )
    problems = settings.problems()
    if problems:
        raise GenerationError(" ".join(problems))
    n_ctx = model.facts.n_ctx
    if n_prompt + settings.max_new_tokens > n_ctx:
        room = max(n_ctx - n_prompt, 0)
        raise GenerationError(
            f"The prompt has {n_prompt:,} tokens and {settings.max_new_tokens:,} new ones were "
            f"asked for, but {model.facts.name} reads at most {n_ctx:,} tokens: ask for at most "
            f"{room:,} new tokens or shorten the prompt."
        )
