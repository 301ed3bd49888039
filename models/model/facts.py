"""Facts about a loaded model that every analysis needs, read once from the bridge config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from models.head import HeadGroups, SharingKind

# The most bytes a capture keeps as whole float32 patterns (every head's n x n); longer prompts
# keep q, k and each row's log-sum-exp instead (models.capture.store).
DENSE_LIMIT_BYTES = 192 * 1024**2
STREAM_ROWS = 256  # query rows a streamed capture scores at once


@dataclass(frozen=True)
class ModelFacts:
    """Shape and behaviour of a model's attention.

    ``n_kv_heads`` equals ``n_heads`` for multi-head attention and is smaller for GQA/MQA.
    ``positional`` is TransformerLens's scheme name: ``standard`` (learned absolute),
    ``rotary``, ``alibi``, ``shortformer`` or ``none``. ``d_mlp`` (the MLP's hidden width) and
    ``d_vocab`` are 0 where the configuration does not say.
    """

    name: str
    architecture: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_model: int
    n_ctx: int
    causal: bool
    positional: str
    prepends_bos: bool
    n_params: int
    d_mlp: int = 0
    d_vocab: int = 0

    @property
    def n_total_heads(self) -> int:
        return self.n_layers * self.n_heads

    @property
    def groups(self) -> HeadGroups:
        """Which key/value head each query head reads (GQA, MQA; MHA is groups of one)."""
        return HeadGroups(self.n_heads, self.n_kv_heads)

    def holds_dense(self, n_tokens: int) -> bool:
        """Whether every head's whole float32 pattern over ``n_tokens`` fits within
        :data:`DENSE_LIMIT_BYTES` (the capture keeps patterns whole up to there)."""
        return self.pattern_bytes(n_tokens) <= DENSE_LIMIT_BYTES

    def forward_flops(self, n_tokens: int) -> float:
        """Approximate floating-point operations of one forward pass over ``n_tokens``: two per
        parameter per token, plus ``q k^T`` and ``A v`` (halved when causal)."""
        attention = 4.0 * self.n_layers * self.n_heads * self.d_head * n_tokens**2
        return 2.0 * self.n_params * n_tokens + attention * (0.5 if self.causal else 1.0)

    def pattern_bytes(self, n_tokens: int, batch: int = 1) -> int:
        """Bytes of every head's full float32 pattern over ``n_tokens`` (``batch`` sequences)."""
        return 4 * batch * self.n_layers * self.n_heads * n_tokens * n_tokens

    def activation_bytes(self, n_tokens: int, batch: int = 1) -> int:
        """Working memory of one forward pass beyond the weights: the residual stream and a
        layer's activations (a generous 32 widths per token), plus one layer's attention
        scores and pattern when the pass builds them (eager attention)."""
        per_token = 32 * self.d_model * 4
        scores = 2 * 4 * self.n_heads * n_tokens * n_tokens
        return batch * (per_token * n_tokens + scores)

    def capture_bytes(self, n_tokens: int) -> int:
        """Peak memory a capture of ``n_tokens`` needs beyond the weights (an upper estimate).

        Short prompts keep every pattern (and pass through eager attention once); long ones
        keep q, k and each row's log-sum-exp per head and work through one layer in chunks of
        query rows (:mod:`models.capture.streaming`).
        """
        if self.holds_dense(n_tokens):
            return 2 * self.pattern_bytes(n_tokens) + self.activation_bytes(n_tokens)
        # q and two floats per row (LSE, value norm) for every query head, k per key head
        width = self.n_heads * (self.d_head + 2) + self.n_kv_heads * self.d_head
        kept = 4 * n_tokens * self.n_layers * width
        # a block of rows' scores, their exponentials and sums
        chunk = 4 * 3 * self.n_heads * min(n_tokens, STREAM_ROWS) * n_tokens
        return kept + chunk + 32 * self.d_model * 4 * n_tokens

    @property
    def attention_kind(self) -> SharingKind:
        return self.groups.kind


def distinct_parameters(module: Any) -> int:
    """How many numbers a module's parameters hold, each storage counted once.

    The bridge splits GPT-2's joint ``c_attn`` into q, k and v parameters that are views of the
    same storage; counting parameters would count those weights twice.
    """
    storages = {}
    for p in module.parameters():
        storage = p.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes() // p.element_size()
    return int(sum(storages.values()))


def facts_from_bridge(bridge: Any, name: str) -> ModelFacts:
    """Read :class:`ModelFacts` off a ``TransformerBridge``; nothing here assumes causal or MHA."""
    cfg = bridge.cfg
    n_heads = int(cfg.n_heads)
    n_kv = getattr(cfg, "n_key_value_heads", None) or n_heads
    n_params = distinct_parameters(bridge.original_model)
    return ModelFacts(
        name=name,
        architecture=str(
            getattr(cfg, "architecture", None) or type(bridge.original_model).__name__
        ),
        n_layers=int(cfg.n_layers),
        n_heads=n_heads,
        n_kv_heads=int(n_kv),
        d_head=int(cfg.d_head),
        d_model=int(cfg.d_model),
        n_ctx=int(cfg.n_ctx),
        causal=getattr(cfg, "attention_dir", "causal") != "bidirectional",
        positional=str(getattr(cfg, "positional_embedding_type", "standard")),
        prepends_bos=bool(getattr(cfg, "default_prepend_bos", True)),
        n_params=int(n_params),
        d_mlp=int(getattr(cfg, "d_mlp", 0) or 0),
        d_vocab=int(getattr(cfg, "d_vocab", 0) or 0),
    )
