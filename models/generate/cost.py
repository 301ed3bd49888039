"""What generation and the eviction sweep cost before they run: seconds and peak bytes.

Seconds are a first guess from FLOPs (two per parameter per token, plus ``q k^T`` and ``A v``)
at an assumed sustained rate, plus, for decoding, a per-layer overhead per step (one token at a
time is bound by reading the weights and by Python, not by FLOPs) and, for H2O, the per-query
loop. Peak bytes count what the work adds beside the loaded weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.generate.kv import kv_bytes_per_token
from models.model.facts import ModelFacts

FLOPS = {"cpu": 4e10, "cuda": 2e12}  # sustained FLOP/s assumed before anything is measured
STEP_LAYER_S = {"cpu": 4e-4, "cuda": 1.5e-4}  # per layer per decoding step
# per query per layer of the H2O loop (NumPy on the CPU): a fixed part and a part per budget slot
H2O_QUERY_LAYER_S = (3e-5, 3e-7)
FLOAT = 4
LOGIT_CHUNK = 256
BLOCK = 128


@dataclass(frozen=True)
class Estimate:
    """Expected seconds (a first guess) and an upper bound on the bytes the work adds."""

    seconds: float
    peak_bytes: int


def _attention_flops(facts: ModelFacts, n_queries: int, n_keys: float) -> float:
    return 4.0 * facts.n_layers * facts.n_heads * facts.d_head * n_queries * n_keys


def row_store_bytes(facts: ModelFacts, n_prompt: int, n_new: int) -> int:
    """Bytes a :class:`models.generate.rows.RowStore` and the step series keep."""
    per_step = facts.n_layers * facts.n_heads * (facts.d_head + 1 + 2) * FLOAT
    per_token = facts.n_layers * facts.n_kv_heads * facts.d_head * FLOAT
    return n_new * per_step + (n_prompt + n_new) * per_token


def dense_rows_bytes(facts: ModelFacts, n_prompt: int, n_new: int) -> int:
    """Bytes of the ``step layer head_index key_pos`` float32 array the command line writes."""
    return n_new * facts.n_layers * facts.n_heads * (n_prompt + n_new) * FLOAT


def generation_estimate(
    facts: ModelFacts,
    n_prompt: int,
    n_new: int,
    device: str = "cpu",
    bytes_per_element: int = 4,
    vocab: int = 50_000,
) -> Estimate:
    """Cost of :func:`models.generate.generation.generate`: the prompt once, then one token a
    step; bytes: the KV cache, the kept rows, one step's live rows and logits."""
    flops = 2.0 * facts.n_params * (n_prompt + n_new)
    flops += _attention_flops(facts, n_prompt, n_prompt / 2) * 0.5
    flops += _attention_flops(facts, n_new, n_prompt + n_new / 2) * 2
    seconds = flops / FLOPS.get(device, FLOPS["cpu"])
    seconds += n_new * facts.n_layers * STEP_LAYER_S.get(device, STEP_LAYER_S["cpu"])
    total = n_prompt + n_new
    peak = (
        total * kv_bytes_per_token(facts, bytes_per_element)
        + row_store_bytes(facts, n_prompt, n_new)
        + 2 * facts.n_layers * facts.n_heads * total * FLOAT
        + n_prompt * facts.d_model * FLOAT * 12
        + 2 * vocab * FLOAT
    )
    return Estimate(seconds=seconds, peak_bytes=int(peak))


def eviction_estimate(
    facts: ModelFacts,
    n_tokens: int,
    budgets: tuple[int, ...],
    policies: tuple[str, ...],
    device: str = "cpu",
    bytes_per_element: int = 4,
    vocab: int = 50_000,
) -> Estimate:
    """Cost of :func:`models.generate.sweep.eviction_sweep`: one full pass, then ``n - B``
    tokens per policy and budget; H2O adds its per-query loop. Bytes: the full pass's keys
    and values (kept for the sweep) and one policy pass's, float32 copies of a layer's q, k, v,
    a block of scores, the hidden states and a chunk of logits."""
    runs = [(p, b) for p in policies if p != "full" for b in budgets if b < n_tokens]
    tokens = n_tokens + sum(n_tokens - b for _, b in runs)
    flops = 2.0 * facts.n_params * tokens + _attention_flops(facts, n_tokens, n_tokens / 2)
    flops += sum(_attention_flops(facts, n_tokens - b, b) for _, b in runs)
    seconds = flops / FLOPS.get(device, FLOPS["cpu"])
    fixed, per_slot = H2O_QUERY_LAYER_S
    seconds += facts.n_layers * sum(
        (n_tokens - b) * (fixed + per_slot * b) for p, b in runs if p == "h2o"
    )
    kv = n_tokens * kv_bytes_per_token(facts, bytes_per_element)
    layer_f32 = n_tokens * (facts.n_heads + 2 * facts.n_kv_heads) * facts.d_head * FLOAT
    peak = (
        2 * kv
        + 2 * layer_f32
        + 3 * facts.n_heads * BLOCK * n_tokens * FLOAT
        + 12 * n_tokens * facts.d_model * FLOAT
        + 2 * LOGIT_CHUNK * vocab * FLOAT
    )
    return Estimate(seconds=seconds, peak_bytes=int(peak))
