"""What head-finder work costs, before it runs: seconds and peak memory from the model's size and
the input, and progress reported in units of work so that the time left is measured, not guessed.

Work is counted in parameter-token units (2 FLOPs each). A pass of ``copies`` x ``n`` tokens that
starts at block ``start`` costs ``copies * n * ((n_layers - start) * block + unembed)`` units,
where ``block`` is one block's parameter count and ``unembed`` the unembedding's. Memory is the
transient working set of one forward pass (:func:`forward_peak_bytes`): the attention scores and
pattern of the layer being computed, the residual stream and the logits; each caller adds what
it keeps. The weights themselves are not counted: they are already loaded. Every estimator
returns a :class:`models.cost.Cost`.
"""

from __future__ import annotations

from models.cost import Cost, device_of
from models.model.facts import ModelFacts
from models.model.handle import ModelHandle
from models.progress import Progress

FLOAT_BYTES = 4  # activations are float32 unless the model runs in half precision
ATTENTION_COPIES = 3  # scores, softmax output, and the copy a hook or the next matmul reads
RESIDUAL_COPIES = 12  # residual stream, norms, q/k/v/z and the MLP's 4x-wide hidden layer
LOGITS_COPIES = 2  # the bridge holds the logits twice (measured on SmolLM2: +0.64 GiB for 8 x 403)


class Meter:
    """Progress in units of work (parameters x tokens), so that the fraction done is the share
    of the time spent and a rate measured on the first steps predicts the rest."""

    def __init__(self, progress: Progress, total: float) -> None:
        self.progress, self.total, self.done = progress, max(total, 1e-9), 0.0

    def step(self, cost: float, text: str) -> None:
        self.progress(min(self.done / self.total, 1.0), text)
        self.done += cost


def unit_costs(model: ModelHandle) -> tuple[float, float]:
    """Relative cost per token of one block and of the unembedding (parameter counts)."""
    unembed = float(model.facts.d_vocab * model.facts.d_model)
    body = max(model.facts.n_params - unembed, 0.5 * model.facts.n_params)
    return body / model.facts.n_layers, unembed


def pass_cost(model: ModelHandle, n_tokens: int, start: int = 0, copies: int = 1) -> float:
    """Work of a pass of ``copies`` x ``n_tokens`` tokens that starts at block ``start``."""
    block, unembed = unit_costs(model)
    return copies * n_tokens * ((model.facts.n_layers - start) * block + unembed)


def work_cost(model: ModelHandle, work: float, peak_bytes: int) -> Cost:
    """The cost of ``work`` units (2 FLOPs per parameter and token) on ``model``."""
    return Cost(2.0 * work, int(peak_bytes), device=device_of(model.spec.device))


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
