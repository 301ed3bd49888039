"""Wall-clock timings of the app's kernel, PyTorch SDPA and naive attention on the same tensors.

Median of a few repeats after one warm-up call, ``torch.cuda.synchronize`` around each call on a
GPU. These are numbers measured in the session on whatever machine runs the app, labelled with
that machine; they are never compared against a fixed threshold.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from models.attention.api import Backend, attention, choose_backend
from models.attention.masking import allowed_keys, key_distance
from models.attention.options import AttentionOptions
from models.attention.reference import naive_attention
from models.shapes import Keys, Outputs, Queries, Values


@dataclass(frozen=True)
class Timing:
    """One implementation's time on one layer's tensors.

    Attributes:
        name: what ran, in words.
        median_ms: median milliseconds over ``repeats`` calls (after one warm-up).
        repeats: how many calls were timed.
    """

    name: str
    median_ms: float
    repeats: int


def device_label(device: torch.device | str) -> str:
    """A person-readable name of ``device``: the GPU's name, or the CPU and its thread count."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"GPU: {torch.cuda.get_device_name(device)}"
    return f"CPU ({torch.get_num_threads()} threads)"


def median_ms(fn: Callable[[], object], device: torch.device, repeats: int = 5) -> float:
    """Median milliseconds of ``fn()`` over ``repeats`` calls after one warm-up.

    Args:
        fn: the call to time.
        device: where it runs; on CUDA every call is bracketed by a synchronize.
        repeats: timed calls (at least 1).

    Returns:
        The median wall-clock time in milliseconds.
    """
    cuda = torch.device(device).type == "cuda"

    def call() -> float:
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize(device)
        return (time.perf_counter() - start) * 1e3

    call()
    return statistics.median(call() for _ in range(max(1, repeats)))


def sdpa(
    q: Queries,
    k: Keys,
    v: Values,
    options: AttentionOptions,
) -> Outputs:
    """``torch.nn.functional.scaled_dot_product_attention`` with the kernel's mask semantics.

    Args:
        q: ``batch head_index query_pos d_head``.
        k, v: ``batch kv_head_index key_pos d_head`` (GQA passed through ``enable_gqa``).
        options: the softmax terms (SDPA has no soft cap: refused; no key padding here).

    Returns:
        ``batch head_index query_pos d_head`` output.
    """
    if options.softcap is not None or options.padding is not None:
        raise ValueError("SDPA is timed without a soft cap or key padding")
    causal, window, alibi_slopes = options.causal, options.window, options.alibi
    scale = options.scale_for(q.shape[3])
    n_q, n_k = q.shape[2], k.shape[2]
    gqa = k.shape[1] != q.shape[1]
    if alibi_slopes is None and window is None and (not causal or n_q == n_k):
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=causal, scale=scale, enable_gqa=gqa
        )
    q_pos = torch.arange(n_q, device=q.device)
    k_pos = torch.arange(n_k, device=q.device)
    allowed = allowed_keys(q_pos, k_pos, n_q, n_k, causal=causal, window=window)
    bias = torch.zeros(1, 1, n_q, n_k, device=q.device, dtype=torch.float32)
    if alibi_slopes is not None:
        dist = key_distance(q_pos, k_pos, n_q, n_k, causal=causal)
        bias = -alibi_slopes.to(q.device, torch.float32)[None, :, None, None] * dist
    bias = bias.masked_fill(~allowed, float("-inf")).to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale, enable_gqa=gqa)


def time_implementations(
    q: Queries,
    k: Keys,
    v: Values,
    options: AttentionOptions,
    *,
    backend: Backend = "auto",
    repeats: int = 5,
) -> tuple[Timing, ...]:
    """Time the app's kernel, PyTorch SDPA and naive attention on the same tensors.

    Args:
        q: ``batch head_index query_pos d_head`` on the device and in the dtype to time.
        k, v: ``batch kv_head_index key_pos d_head``.
        options: the softmax terms, as for :func:`models.attention.attention`.
        backend: the kernel backend request.
        repeats: timed calls per implementation.

    Returns:
        Three :class:`Timing` rows: the kernel (named by its backend), SDPA, naive attention
        (materialised, computed in the tensors' own dtype).
    """
    name = choose_backend(q, backend)
    with torch.no_grad():
        rows = [
            (f"app kernel ({name})", lambda: attention(q, k, v, options, backend=backend)),
            ("PyTorch SDPA", lambda: sdpa(q, k, v, options)),
            (
                "naive attention (full pattern)",
                lambda: naive_attention(q, k, v, options, compute_dtype=q.dtype),
            ),
        ]
        return tuple(Timing(label, median_ms(fn, q.device, repeats), repeats) for label, fn in rows)
