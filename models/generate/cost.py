"""What generation and the eviction sweep cost before they run (:class:`models.cost.Cost`).

FLOPs are two per parameter per token, plus ``q k^T`` and ``A v``; fixed seconds are, for
decoding, a per-layer overhead per step (one token at a time is bound by reading the weights
and by Python, not by FLOPs) and, for H2O, the per-query loop. Peak bytes count what the work
adds beside the loaded weights.
"""

from __future__ import annotations

from models.cost import Cost, device_of, with_slack
from models.generate.kv import kv_bytes_per_token
from models.model.facts import ModelFacts

STEP_LAYER_S = {"cpu": 4e-4, "cuda": 1.5e-4}  # per layer per decoding step
# per query per layer of the H2O loop (NumPy on the CPU): a fixed part and a part per budget slot
H2O_QUERY_LAYER_S = (3e-5, 3e-7)
FLOAT = 4
LOGIT_CHUNK = 256
# d_model-wide and d_mlp-wide float32 tensors per token alive at once in a prompt's pass (the
# residual stream, norms, q/k/v and attention output; the MLP's gate, up and product): 16 and 6
# bound what SmolLM2's pass was measured to add at 1,000-3,900 tokens.
PREFILL_WIDTHS = (16, 6)
BLOCK = 128
# float32 copies of the whole prompt's logits in the plain pass with labels the sweep is checked
# against (the logits, the loss's log-softmax and its temporaries): SmolLM2 at 1,000 tokens
# added 617 MiB, 3.3 times one copy
PLAIN_LOGIT_COPIES = 4


def _attention_flops(facts: ModelFacts, n_queries: int, n_keys: float) -> float:
    return 4.0 * facts.n_layers * facts.n_heads * facts.d_head * n_queries * n_keys


def generation_estimate(
    facts: ModelFacts,
    n_prompt: int,
    n_new: int,
    device: str = "cpu",
    bytes_per_element: int = 4,
    vocab: int = 50_000,
) -> Cost:
    """Cost of :func:`models.generate.generation.generate`: the prompt once, then one token a
    step.

    Bytes, everything counted at once (an upper bound): the KV cache reserved for the whole
    text (:func:`models.generate.kv.reserved_cache`), the recorder's float32 keys and the copy
    the finished result keeps of them, the kept rows' queries and series, one step's rows with
    their scores, the prompt's pass (:data:`PREFILL_WIDTHS` tensors as wide as the residual
    stream and as the MLP per token, float32) and the logits, with
    :func:`models.cost.with_slack` (the count comes close to the peak: SmolLM2 after a
    1,000-token prompt measured 160 to 187 MiB against 172 counted).
    """
    flops = 2.0 * facts.n_params * (n_prompt + n_new)
    flops += _attention_flops(facts, n_prompt, n_prompt / 2) * 0.5
    flops += _attention_flops(facts, n_new, n_prompt + n_new / 2) * 2
    where = device_of(device)
    overhead = n_new * facts.n_layers * STEP_LAYER_S[where]
    total = n_prompt + n_new
    keys = total * facts.n_layers * facts.n_kv_heads * facts.d_head * FLOAT
    residual, mlp = PREFILL_WIDTHS
    d_mlp = facts.d_mlp or 4 * facts.d_model
    peak = (
        total * kv_bytes_per_token(facts, bytes_per_element)
        + 2 * keys
        + n_new * facts.n_layers * facts.n_heads * (facts.d_head + 4) * FLOAT
        + 3 * facts.n_layers * facts.n_heads * total * FLOAT
        + n_prompt * (residual * facts.d_model + mlp * d_mlp) * FLOAT
        + 2 * (facts.d_vocab or vocab) * FLOAT
    )
    return Cost(flops, with_slack(peak), overhead, where)


def eviction_estimate(
    facts: ModelFacts,
    n_tokens: int,
    budgets: tuple[int, ...],
    policies: tuple[str, ...],
    device: str = "cpu",
    bytes_per_element: int = 4,
    vocab: int = 50_000,
) -> Cost:
    """Cost of :func:`models.generate.sweep.eviction_sweep`: one full pass, then ``n - B``
    tokens per policy and budget; H2O adds its per-query loop. Bytes: the full pass's keys
    and values (kept for the sweep) and one policy pass's, float32 copies of a layer's q, k, v,
    a block of scores, the hidden states and a chunk of logits; then the plain forward pass with
    labels it is checked against, whose whole logits (:data:`PLAIN_LOGIT_COPIES`) set the peak
    of a long text."""
    runs = [(p, b) for p in policies if p != "full" for b in budgets if b < n_tokens]
    tokens = n_tokens + sum(n_tokens - b for _, b in runs)
    flops = 2.0 * facts.n_params * tokens + _attention_flops(facts, n_tokens, n_tokens / 2)
    flops += sum(_attention_flops(facts, n_tokens - b, b) for _, b in runs)
    fixed, per_slot = H2O_QUERY_LAYER_S
    overhead = facts.n_layers * sum(
        (n_tokens - b) * (fixed + per_slot * b) for p, b in runs if p == "h2o"
    )
    kv = n_tokens * kv_bytes_per_token(facts, bytes_per_element)
    layer_f32 = n_tokens * (facts.n_heads + 2 * facts.n_kv_heads) * facts.d_head * FLOAT
    hidden = 12 * n_tokens * facts.d_model * FLOAT  # the hidden states, either pass
    peak = (
        2 * kv
        + 2 * layer_f32
        + 3 * facts.n_heads * BLOCK * n_tokens * FLOAT
        + hidden
        + 2 * LOGIT_CHUNK * vocab * FLOAT
    )
    plain = PLAIN_LOGIT_COPIES * n_tokens * vocab * FLOAT + hidden
    return Cost(
        flops + 2.0 * facts.n_params * n_tokens, int(max(peak, plain)), overhead, device_of(device)
    )
