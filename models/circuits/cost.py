"""What each circuits computation costs, before it runs: the passes it makes and its
:class:`models.cost.Cost` (FLOPs, fixed seconds, the peak memory beyond the loaded weights).

A forward pass over ``n`` tokens costs :meth:`ModelFacts.forward_flops` (two FLOPs per parameter
and token plus attention); a backward pass that only needs gradients with respect to activations
costs about as much again (:data:`BACKWARD_FACTOR`). Fixed seconds are an overhead per block and
pass (hooks, Python, small kernels), which dominates for short prompts on a CPU. The page shows
these before running; the job pool refuses work whose ``peak_bytes`` does not fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from models.circuits.edges import chunk_size
from models.circuits.patching import batch_size, copy_bytes
from models.circuits.weight_circuits import VOCAB_CHUNK
from models.cost import Cost, device_of
from models.model.handle import ModelHandle
from models.model.weights import vocab_size

LAYER_OVERHEAD_S = {"cpu": 0.01, "cuda": 0.001}  # per block and pass
BACKWARD_FACTOR = 1.0
FLOAT = 4
GRAPH_COPIES = 16  # d_model-wide tensors a block keeps for the backward pass (MLP included)
# attribution patching's own d_model-wide tensors per block and token (measured on SmolLM2 at
# 150-450 tokens: the estimate 1.02-1.10x the peak with 24; 32 leaves room for the allocator)
ATP_COPIES = 32
POSITIONS = 64
WEIGHTS_SLACK = 1.5  # the allocator's share over the arrays the weights job holds


@dataclass(frozen=True)
class PassPlan:
    """A circuits computation before it runs: the passes it makes (what the page states) and
    what it will take (:class:`models.cost.Cost`, what the server checks and times).

    Attributes:
        forward_passes: in single-prompt forward passes (a batched pass of ``B`` copies
            counts ``B``; a pass that starts at block ``l`` counts its share).
        backward_passes: likewise, backward passes.
        cost: FLOPs, fixed seconds and the peak memory.
    """

    forward_passes: float
    backward_passes: float
    cost: Cost

    @property
    def seconds(self) -> float:
        """At the assumed rate (the server times it at the rate it measured)."""
        return self.cost.seconds()

    @property
    def peak_bytes(self) -> int:
        return self.cost.peak_bytes

    def then(self, other: PassPlan) -> PassPlan:
        """This computation followed by ``other``."""
        return PassPlan(
            self.forward_passes + other.forward_passes,
            self.backward_passes + other.backward_passes,
            self.cost.then(other.cost),
        )

    def describe(self) -> str:
        """``3 forward + 1 backward passes, about 2 s, at most 40 MB``."""
        passes = f"{self.forward_passes:.3g} forward"
        if self.backward_passes:
            passes += f" + {self.backward_passes:.3g} backward"
        one = self.forward_passes + self.backward_passes == 1
        return f"{passes} {'pass' if one else 'passes'}, {self.cost.describe()}"


def _make(
    model: ModelHandle,
    n_tokens: int,
    forward: float,
    backward: float,
    extra_flops: float,
    peak: float,
) -> PassPlan:
    facts, device = model.facts, device_of(model.spec.device)
    flops = (forward + BACKWARD_FACTOR * backward) * facts.forward_flops(n_tokens) + extra_flops
    overhead = math.ceil(forward + backward) * facts.n_layers * LAYER_OVERHEAD_S[device]
    return PassPlan(forward, backward, Cost(flops, int(peak), overhead, device))


def forward_cost(model: ModelHandle, n_tokens: int, passes: float = 1.0) -> PassPlan:
    """``passes`` plain forward passes over ``n_tokens`` (no gradients kept)."""
    return _make(model, n_tokens, passes, 0.0, 0.0, model.facts.activation_bytes(n_tokens))


def _activation_bytes(model: ModelHandle, n_tokens: int) -> float:
    """A pass's saved activations for backward, all blocks, and its logits."""
    f = model.facts
    per_block = GRAPH_COPIES * n_tokens * f.d_model + 4 * f.n_heads * n_tokens**2
    return FLOAT * (f.n_layers * per_block + 2 * n_tokens * vocab_size(model))


def _logits_bytes(model: ModelHandle, n_tokens: int, copies: int) -> int:
    """One float32 copy of ``copies`` patched runs' logits: what a batch of runs to the logits
    holds beyond :func:`copy_bytes` (path patching, and the circuit graph's senders)."""
    return copies * n_tokens * vocab_size(model) * FLOAT


def _head_values_bytes(model: ModelHandle, n_tokens: int) -> float:
    """z, q, k, v of every head in one run."""
    f = model.facts
    return FLOAT * f.n_layers * n_tokens * f.d_head * 2 * (f.n_heads + f.n_kv_heads)


def atp_cost(
    model: ModelHandle,
    n_tokens: int,
    *,
    qk_fix: bool = True,
    grad_drop: bool = False,
    verify_top: int = 0,
) -> PassPlan:
    """Cost of :func:`models.circuits.atp.attribution_patching`.

    Two forward passes and one backward pass; GradDrop adds ``L - 1`` partial backward passes
    (``(L - 1) / 2`` full ones); ``verify_top`` adds at most that many forward passes (fewer:
    they start at the lowest checked layer). The QK fix recomputes each layer's patterns twice
    (``4 n_heads n^2 d_head`` FLOPs per layer).
    """
    f = model.facts
    backward = 1.0 + ((f.n_layers - 1) / 2 if grad_drop else 0.0)
    extra = 2 * 4.0 * f.n_layers * f.n_heads * n_tokens**2 * f.d_head if qk_fix else 0.0
    values = 3 * _head_values_bytes(model, n_tokens)  # clean, corrupted, gradients
    # the leaves and their sums, the rotated q and k of both runs and the MLP's wide
    # activations, beyond what a plain backward keeps (:data:`ATP_COPIES`)
    values += FLOAT * f.n_layers * ATP_COPIES * n_tokens * f.d_model
    if qk_fix:  # the corrupted scores and the patterns' gradients, kept in place of the graph's
        values += FLOAT * f.n_layers * f.n_heads * n_tokens**2
    if grad_drop:
        values += (f.n_layers - 1) / 2 * _head_values_bytes(model, n_tokens)
    peak = _activation_bytes(model, n_tokens) + values
    if verify_top:
        peak = max(peak, exact_cost(model, n_tokens, verify_top).peak_bytes + values)
    return _make(model, n_tokens, 2.0 + verify_top, backward, extra, peak)


def exact_cost(
    model: ModelHandle, n_tokens: int, n_runs: int, batch: int | None = None
) -> PassPlan:
    """Cost of ``n_runs`` patched runs batched as :mod:`models.circuits.patching` does (the
    clean and corrupted baseline passes included)."""
    batch = batch or batch_size(model, n_tokens)
    peak = min(batch, n_runs) * copy_bytes(model, n_tokens) + _head_values_bytes(model, n_tokens)
    return _make(model, n_tokens, 2.0 + n_runs, 0.0, 0.0, peak)


def baseline_cost(model: ModelHandle, n_tokens: int, batch: int | None = None) -> PassPlan:
    """Cost of :func:`models.circuits.patching.baseline`: the clean pass, keeping every head's
    ``z`` and the activations direct logit attribution reads (each MLP's output, the
    embeddings and the final norm's input), then ``batch`` corrupted copies in one pass (each
    copy's logits and working set as a patched copy's, :func:`exact_cost`)."""
    f = model.facts
    batch = batch or batch_size(model, n_tokens)
    widths = f.n_layers * (f.n_heads * f.d_head + f.d_model) + 3 * f.d_model  # z, MLP out, embeds
    kept = FLOAT * n_tokens * widths
    copies = exact_cost(model, n_tokens, batch, batch).peak_bytes
    return _make(model, n_tokens, 1.0 + batch, 0.0, 0.0, kept + copies)


def path_cost(
    model: ModelHandle, n_tokens: int, receiver_layer: int, batch: int | None = None
) -> PassPlan:
    """Cost of :func:`models.circuits.paths.path_patching` into a head of ``receiver_layer``:
    one run per sender (``receiver_layer * n_heads``), each from the receiver's block on.

    Memory: a batch of patched copies as :func:`exact_cost` prices it, one more float32 copy
    of each copy's logits (SmolLM2 added 518 MiB at 300 tokens, 3 copies a pass, and 399 MiB
    at 600, one, against 466 and 391 without it), and the clean and corrupted ``z`` and the
    corrupted residual of every block below the receiver."""
    f = model.facts
    senders = receiver_layer * f.n_heads
    share = (f.n_layers - receiver_layer) / f.n_layers
    batch = batch or batch_size(model, n_tokens)
    run = exact_cost(model, n_tokens, senders, batch)
    logits = _logits_bytes(model, n_tokens, min(batch, max(senders, 1)))
    held = FLOAT * n_tokens * receiver_layer * (2 * f.n_heads * f.d_head + f.d_model)
    return _make(model, n_tokens, 2.0 + senders * share, 0.0, 0.0, run.peak_bytes + logits + held)


def runs_bytes(model: ModelHandle, n_tokens: int, qk_fix: bool = True) -> float:
    """What :func:`models.circuits.atp_runs.attribution_runs` leaves for the edge estimates,
    held while they run: every head's z, q, k and v clean, corrupted and their gradients,
    every block's incoming residual and, with the QK fix, three ``head x pos x pos`` float32
    arrays a layer (on SmolLM2 at 206 tokens 246 MiB held against 249 MiB here; at 606, 1,224
    against 1,494)."""
    f = model.facts
    held = 3 * _head_values_bytes(model, n_tokens) + FLOAT * f.n_layers * n_tokens * f.d_model
    if qk_fix:
        held += 3 * FLOAT * f.n_layers * f.n_heads * n_tokens**2
    return held


def edges_cost(
    model: ModelHandle, n_tokens: int, qk_fix: bool = True, mlps: str = "recomputed"
) -> PassPlan:
    """Cost of :func:`models.circuits.edges.edge_estimates` for every receiver, after the
    passes of :func:`models.circuits.atp_runs.attribution_runs` (not included): with MLPs
    recomputed, one forward pass per sender from its own block on; then, for each pair of
    sender and receiver layer, the receivers' inputs recomputed (``2 d_model (n_heads +
    2 n_kv_heads) d_head`` per token) and, with the QK fix, their patterns. Its peak includes
    what the runs hold meanwhile (:func:`runs_bytes`). The senders' passes run to the logits
    and hold one more float32 copy of them, as :func:`path_cost` counts (SmolLM2 at 22 tokens,
    a chunk of 32: 409 MiB measured, 371 estimated without it)."""
    f = model.facts
    pairs = f.n_heads * f.n_layers * (f.n_layers - 1) / 2  # sender heads x later layers
    per_pair = 2 * n_tokens * f.d_model * (f.n_heads + 2 * f.n_kv_heads) * f.d_head
    if qk_fix:
        per_pair += 2 * 4 * f.n_heads * n_tokens**2 * f.d_head
    forward = 0.0
    if mlps == "recomputed":
        forward = sum(f.n_heads * (f.n_layers - layer) / f.n_layers for layer in range(f.n_layers))
    chunk = chunk_size(model, n_tokens)
    held = chunk * (4 * f.n_layers * n_tokens * f.d_model + 24 * f.n_heads * n_tokens**2)
    edges = 8 * f.n_layers * f.n_heads * f.n_layers * (f.n_heads + 2 * f.n_kv_heads)
    if forward:  # a chunk of patched copies run to the logits, one more copy held, as paths
        held += exact_cost(model, n_tokens, chunk).peak_bytes
        held += _logits_bytes(model, n_tokens, chunk)
    peak = held + edges + int(runs_bytes(model, n_tokens, qk_fix))
    return _make(model, n_tokens, forward, 0.0, pairs * per_pair, peak)


def weights_cost(
    model: ModelHandle, positions: int = POSITIONS, composition: bool = True
) -> PassPlan:
    """Cost of :func:`models.circuits.weight_circuits.weight_scores` (and of
    :func:`models.circuits.composition.composition` when ``composition``): the token Gram
    ``W_U W_E`` (``2 d_vocab d_model^2``), one short forward pass for RoPE tables, and
    ``2 d_head^2 d_model`` per pair of heads in different layers.

    Memory: the Gram reads :data:`VOCAB_CHUNK` tokens of both matrices at a time in float64;
    composition holds every head's four matrices in float64 and in float32, one float64
    product on its way to float32, and a sender layer's ``d_head x d_head`` products with
    every later head (indexed, reshaped, multiplied, squared: four ``n_heads x n_total``
    blocks), with :data:`WEIGHTS_SLACK` over their sum for the allocator."""
    f = model.facts
    n_total = f.n_layers * f.n_heads
    vocab = vocab_size(model)
    flops = 2.0 * vocab * f.d_model**2 + n_total * 30 * f.d_head**3
    gram = 2 * 8 * min(vocab, VOCAB_CHUNK) * f.d_model + 8 * f.d_model**2
    peak = WEIGHTS_SLACK * (gram + 8 * f.n_layers * f.n_heads * positions**2)
    if composition:
        pairs = n_total * n_total / 2
        flops += pairs * (1 + 2 / (f.n_heads // f.n_kv_heads)) * 2 * f.d_head**2 * f.d_model
        matrices = f.d_model * f.d_head * 2 * (n_total + f.n_layers * f.n_kv_heads)
        step = 4 * FLOAT * f.n_heads * n_total * f.d_head**2
        held = (8 + FLOAT) * matrices + 8 * f.d_model * f.d_head * n_total + step
        peak = max(peak, WEIGHTS_SLACK * (held + 3 * 8 * n_total**2))
    return _make(model, positions, 1.0 if f.positional == "rotary" else 0.0, 0.0, flops, peak)
