"""Choosing the next token, and what the page shows about the choice.

The statistics (probability, entropy, alternatives) describe the model's own distribution,
``softmax(logits)`` at temperature 1, whatever the sampler does afterwards: they say how sure the
model was, not how the dice were loaded. Sampling follows transformers' warpers in order:
temperature, then top-k (ties with the k-th logit kept), then top-p (the smallest set of tokens
whose probability reaches ``top_p``; the most likely token always stays), then one draw from a
seeded ``torch.Generator`` on the CPU, so a seed gives the same text on any device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float

from models.generate.settings import GenerationSettings

N_ALTERNATIVES = 5


@dataclass(frozen=True)
class Choice:
    """One step's token and the distribution it came from.

    Attributes:
        token_id: the chosen token.
        prob: its probability under the model (temperature 1).
        entropy: entropy of the model's distribution, in nats.
        top_ids, top_probs: the :data:`N_ALTERNATIVES` most likely tokens and their
            probabilities, most likely first (the chosen token may be among them).
    """

    token_id: int
    prob: float
    entropy: float
    top_ids: tuple[int, ...]
    top_probs: tuple[float, ...]


def filtered_logits(
    logits: Float[torch.Tensor, " vocab"], settings: GenerationSettings
) -> Float[torch.Tensor, " vocab"]:
    """Temperature, top-k and top-p applied; removed tokens at -inf."""
    out = logits / settings.temperature
    if settings.top_k:
        k = min(int(settings.top_k), out.shape[-1])
        kth = torch.topk(out, k).values[-1]
        out = out.masked_fill(out < kth, float("-inf"))
    if settings.top_p < 1.0:
        order = torch.argsort(out, descending=True)
        probs = torch.softmax(out[order], dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # mass of the tokens ranked above
        drop = before >= settings.top_p
        drop[0] = False
        out = out.clone()
        out[order[drop]] = float("-inf")
    return out


def choose(
    logits: Float[torch.Tensor, " vocab"],
    settings: GenerationSettings,
    generator: torch.Generator | None,
) -> Choice:
    """The next token from one position's logits, with its statistics.

    Args:
        logits: float32 logits on the CPU.
        settings: greedy or sampled, with the sampler's settings.
        generator: the seeded CPU generator (sampling only).
    """
    log_probs = torch.log_softmax(logits, dim=-1)
    probs = log_probs.exp()
    entropy = float(-(probs * log_probs).nan_to_num(0.0, 0.0, 0.0).sum())
    top = torch.topk(probs, min(N_ALTERNATIVES, probs.shape[-1]))
    if settings.sampling:
        weights = torch.softmax(filtered_logits(logits, settings), dim=-1)
        token = int(torch.multinomial(weights, 1, generator=generator))
    else:
        token = int(torch.argmax(logits))
    return Choice(
        token_id=token,
        prob=float(probs[token]),
        entropy=entropy,
        top_ids=tuple(int(i) for i in top.indices),
        top_probs=tuple(float(p) for p in top.values),
    )
