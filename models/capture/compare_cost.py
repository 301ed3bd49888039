"""What comparing two prompts will take, stated before the job starts: operations, seconds on
2 CPU cores and the memory it adds (:func:`compare_cost`), lining the prompts up included."""

from __future__ import annotations

from models.capture import compare_fused
from models.capture.alignment import alignment_seconds
from models.capture.compare import CHUNK_CELLS
from models.cost import ASSUMED_FLOPS, Cost
from models.model.facts import ModelFacts

# Weights of one prompt per second, rows of every head, both prompts' products, exponentials and
# divergence terms, measured by benchmarks/compare_prompts.py (SmolLM2, 2,041 x 2,043 tokens):
# 2.3e8 on a quiet 2-core AMD EPYC (AVX512-BF16), 6e7 on 2 cores shared with other work. The
# token rate sits between them, so the first estimate is within 2x of either; the pool learns
# the machine's own rate from the first finished job. Word space merges and takes more
# logarithms (3e7, measured on the shared machine only).
FUSED_CELLS_PER_S = {"tokens": 1.2e8, "words": 3.0e7}
FUSED_BUFFERS = 12  # chunks of logits, weights and terms held at once, both prompts
CELL_BYTES = 32  # dense runs: per weight of one prompt's band, its copies and the other's band
CELLS_PER_CPU_S = 3.7e7  # dense runs: binning + divergence, per CPU second
LAYERS_HELD = 4
CORES = 1.5  # what 2 CPU cores give this mix of threaded torch and single-threaded NumPy


def compare_cost(
    facts: ModelFacts,
    n_a: int,
    n_b: int,
    factored: bool,
    pairs: int = 0,
    words: bool = False,
) -> Cost:
    """Cost of :func:`head_divergence` for prompts of ``n_a`` and ``n_b`` tokens.

    Lining the prompts up weighs ``pairs`` pairs of equal items
    (:func:`models.capture.alignment.equal_pairs`). Then every aligned row of every head meets
    every key it sees in each prompt (half of them in a causal model): runs that keep q and k
    (``factored``) compute ``log p`` of both prompts with two products of ``2 (d_head + 1)``
    operations a weight, and the divergence terms with two exponentials, one logarithm and
    about ten more operations (:mod:`models.capture.compare_fused`); dense runs read stored rows
    and bin them. Seconds come from rates measured on 2 CPU cores; the peak is both prompts'
    layers of q and k in float32 (:data:`LAYERS_HELD`) and a few chunks of logits (fused), or a
    band of rows per prompt with its copies (dense).
    """
    heads = facts.n_layers * facts.n_heads
    longest, shortest = max(n_a, n_b, 1), min(n_a, n_b)
    cells = heads * shortest * longest * (0.5 if facts.causal else 1.0)
    if factored:
        width = facts.d_head + 1
        # a layer's float32 copies of q and k, the layer before's still held while they are
        # made, and a band's queries regrouped by key head: about three layers' worth, and one
        # more for the heap (measured on SmolLM2 at 700-3,000 tokens a prompt: 17-59 MiB)
        layer = LAYERS_HELD * (facts.n_heads + facts.n_kv_heads) * (n_a + n_b) * width * 4
        chunks = FUSED_BUFFERS * compare_fused.CHUNK_CELLS * 4 * (2 if words else 1)
        flops = float(cells * (4 * width + 20))
        seconds = cells / FUSED_CELLS_PER_S["words" if words else "tokens"]
        return measured(flops, seconds + alignment_seconds(pairs), int(layer + chunks))
    rows = min(longest, max(1, CHUNK_CELLS // (facts.n_heads * longest)))
    band = facts.n_heads * rows * longest
    seconds = cells / CELLS_PER_CPU_S / CORES + alignment_seconds(pairs)
    return measured(float(12 * cells), seconds, int(2 * band * CELL_BYTES))


def measured(flops: float, seconds: float, peak_bytes: int) -> Cost:
    """A CPU :class:`Cost` that takes ``seconds`` at the assumed rate: what the measured rates
    give beyond ``flops`` at that rate (NumPy, exponentials, the diff's search) is overhead."""
    overhead = max(0.0, seconds - flops / ASSUMED_FLOPS["cpu"])
    return Cost(flops=flops, peak_bytes=peak_bytes, overhead_s=overhead, device="cpu")
