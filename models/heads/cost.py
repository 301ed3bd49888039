"""What head-finder work costs, before it runs: seconds and peak memory from the model's size and
the input, and progress reported in units of work so that the time left is measured, not guessed.

Work is counted in parameter-token units (2 FLOPs each). A pass of ``copies`` x ``n`` tokens that
starts at block ``start`` costs ``copies * n * ((n_layers - start) * block + unembed)`` units,
where ``block`` is one block's parameter count and ``unembed`` the unembedding's. Memory is the
transient working set of one forward pass (:func:`forward_peak_bytes`): the attention scores and
pattern of the layer being computed, the residual stream and the logits; each caller adds what
it keeps. The weights themselves are not counted: they are already loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.model.facts import ModelFacts
from models.model.loading import LoadedModel
from models.progress import Progress

FLOPS = {"cpu": 4e10, "cuda": 2e12}  # sustained FLOP/s assumed before anything is measured
FLOAT_BYTES = 4  # activations are float32 unless the model runs in half precision
ATTENTION_COPIES = 3  # scores, softmax output, and the copy a hook or the next matmul reads
RESIDUAL_COPIES = 12  # residual stream, norms, q/k/v/z and the MLP's 4x-wide hidden layer
LOGITS_COPIES = 2  # the bridge holds the logits twice (measured on SmolLM2: +0.64 GiB for 8 x 403)


@dataclass(frozen=True)
class Estimate:
    """What a piece of work is expected to cost: a first guess at its seconds (the progress
    panel replaces it with a measured rate) and an upper bound on its peak memory in bytes."""

    seconds: float
    peak_bytes: int


class Meter:
    """Progress in units of work (parameters x tokens), so that the fraction done is the share
    of the time spent and a rate measured on the first steps predicts the rest."""

    def __init__(self, progress: Progress, total: float) -> None:
        self.progress, self.total, self.done = progress, max(total, 1e-9), 0.0

    def step(self, cost: float, text: str) -> None:
        self.progress(min(self.done / self.total, 1.0), text)
        self.done += cost


def d_vocab(model: LoadedModel) -> int:
    """The model's vocabulary size (0 when the bridge does not say)."""
    return int(getattr(model.bridge.cfg, "d_vocab", 0) or 0)


def unit_costs(model: LoadedModel) -> tuple[float, float]:
    """Relative cost per token of one block and of the unembedding (parameter counts)."""
    unembed = float(d_vocab(model) * model.facts.d_model)
    body = max(model.facts.n_params - unembed, 0.5 * model.facts.n_params)
    return body / model.facts.n_layers, unembed


def pass_cost(model: LoadedModel, n_tokens: int, start: int = 0, copies: int = 1) -> float:
    """Work of a pass of ``copies`` x ``n_tokens`` tokens that starts at block ``start``."""
    block, unembed = unit_costs(model)
    return copies * n_tokens * ((model.facts.n_layers - start) * block + unembed)


def seconds_for(model: LoadedModel, work: float) -> float:
    """A first guess at the time ``work`` units take (2 FLOPs per parameter and token)."""
    return 2.0 * work / FLOPS.get(model.spec.device, FLOPS["cpu"])


def forward_seconds(facts: ModelFacts, device: str, n_tokens: int, batch: int = 1) -> float:
    """A first guess at the seconds of ``batch`` forward passes over ``n_tokens`` tokens,
    attention's ``n_tokens ** 2`` term included (:meth:`ModelFacts.forward_flops`)."""
    return batch * facts.forward_flops(n_tokens) / FLOPS.get(device, FLOPS["cpu"])


def layer_pattern_bytes(facts: ModelFacts, n_tokens: int, batch: int = 1) -> int:
    """Bytes of one layer's ``batch head_index query_pos key_pos`` patterns in float32."""
    return batch * facts.n_heads * n_tokens * n_tokens * FLOAT_BYTES


def forward_peak_bytes(facts: ModelFacts, vocab: int, n_tokens: int, batch: int = 1) -> int:
    """Transient bytes of one forward pass beyond the weights: one layer's attention
    (:data:`ATTENTION_COPIES` pattern-sized tensors), the residual stream and its neighbours
    (:data:`RESIDUAL_COPIES` copies of ``batch pos d_model``) and the ``batch pos d_vocab``
    logits (:data:`LOGITS_COPIES` of them).

    Args:
        facts: the model's shape.
        vocab: its vocabulary size (the logits' last axis).
        n_tokens: tokens per sequence.
        batch: sequences in the pass.
    """
    attention = ATTENTION_COPIES * layer_pattern_bytes(facts, n_tokens, batch)
    residual = RESIDUAL_COPIES * batch * n_tokens * facts.d_model * FLOAT_BYTES
    logits = LOGITS_COPIES * batch * n_tokens * vocab * FLOAT_BYTES
    return attention + residual + logits
