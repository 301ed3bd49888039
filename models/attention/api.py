"""The public attention call: validate, pick a backend, run it.

Like nanoGPT's ``self.flash`` switch, there is one fast path (the Triton kernel on a CUDA tensor)
and one plain path beside it (the tiled PyTorch implementation, exact on any device). Which one
runs is decided by :func:`choose_backend`, a pure function of the tensor, the request and the
environment, so a page can show the user what ran.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Literal

import torch

from models.attention.options import NO_OPTIONS, AttentionOptions
from models.attention.tiled import tiled_attention
from models.attention.validate import check_options, check_qkv
from models.shapes import Keys, Outputs, Queries, RowLse, Values

Backend = Literal["auto", "triton", "torch"]
BackendName = Literal["triton-gpu", "triton-interpreter", "torch-tiled"]
BACKENDS: tuple[Backend, ...] = ("auto", "triton", "torch")


def triton_available() -> bool:
    """True when the ``triton`` package can be imported (without importing it)."""
    return importlib.util.find_spec("triton") is not None


def _kernel_is_interpreted() -> bool:
    """Whether the Triton kernel module runs (or will run, once imported) in the interpreter."""
    module = sys.modules.get("models.attention.triton_kernel")
    if module is not None:
        interpreted: bool = module.INTERPRETED
        return interpreted
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def choose_backend(q: torch.Tensor, backend: Backend = "auto") -> BackendName:
    """Name the implementation :func:`attention` will run for ``q`` and ``backend``.

    ``"auto"`` picks the compiled Triton kernel for a CUDA tensor when triton is installed and
    the tiled PyTorch path otherwise. ``"triton"`` forces the kernel: compiled on CUDA, or in
    Triton's interpreter when ``TRITON_INTERPRET=1`` was set before the kernel module was
    imported. ``"torch"`` forces the tiled path.

    Args:
        q: ``batch head_index query_pos d_head`` queries (only the device is read).
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``"triton-gpu"``, ``"triton-interpreter"`` or ``"torch-tiled"``.

    Raises:
        ValueError: for an unknown backend name.
        RuntimeError: when ``"triton"`` is forced where it cannot run.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    if backend == "torch":
        return "torch-tiled"
    if backend == "auto":
        usable = q.is_cuda and triton_available() and not _kernel_is_interpreted()
        return "triton-gpu" if usable else "torch-tiled"
    if not triton_available():
        raise RuntimeError("backend='triton' was asked for but triton is not installed")
    if _kernel_is_interpreted():
        return "triton-interpreter"
    if q.is_cuda:
        return "triton-gpu"
    raise RuntimeError(
        "backend='triton' needs a CUDA tensor, or TRITON_INTERPRET=1 set before "
        "models.attention.triton_kernel is imported (Triton's CPU interpreter)"
    )


def attention(
    q: Queries,
    k: Keys,
    v: Values,
    options: AttentionOptions = NO_OPTIONS,
    *,
    backend: Backend = "auto",
) -> tuple[Outputs, RowLse]:
    """Scaled dot-product attention that also returns the per-row log-sum-exp.

    The pattern is never materialised; rebuild any part of it with
    :func:`models.attention.rebuild_pattern` from q, k and the returned LSE. Masking rules
    (bottom-right causal alignment when ``n_q != n_k``, windows, ALiBi distances) are documented
    in :mod:`models.attention.masking`.

    Args:
        q: ``batch head_index query_pos d_head``, float32/float16/bfloat16.
        k: ``batch kv_head_index key_pos d_head``; ``head_index`` must be a multiple of
            ``kv_head_index`` (GQA/MQA: query head h uses K/V head ``h // group``).
        v: ``batch kv_head_index key_pos d_head``, same shape and dtype as k.
        options: the softmax terms: causal mask, scale (None: ``1 / sqrt(d_head)``), ALiBi
            slopes, sliding window, soft cap, key padding (see :class:`AttentionOptions`).
        backend: ``"auto"``, ``"triton"`` or ``"torch"`` (see :func:`choose_backend`).

    Returns:
        ``out``: ``batch head_index query_pos d_head`` in q's dtype; ``lse``:
        ``batch head_index query_pos`` float32 natural-log LSE of the scaled, biased, masked
        logits. A row with no visible key has output 0 and LSE -inf.

    Raises:
        ValueError: for inconsistent shapes, unsupported dtypes or bad options.
        RuntimeError: when ``backend="triton"`` cannot run here.
    """
    check_qkv(q, k, v)
    options = check_options(q, k, options)
    name = choose_backend(q, backend)
    b, n_heads, n_q, _ = q.shape
    if n_q == 0 or k.shape[2] == 0:  # nothing to launch: every row (if any) has no key
        return (torch.zeros_like(q), torch.full((b, n_heads, n_q), float("-inf"), device=q.device))
    if name == "torch-tiled":
        return tiled_attention(q, k, v, options)
    from models.attention.triton_kernel import triton_attention

    return triton_attention(q, k, v, options)
