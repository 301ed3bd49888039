"""Shape, dtype and option checks shared by every attention entry point.

Each check raises :class:`ValueError` with a message naming the argument, the expected shape and
what was given, so a caller (or a page showing the error) can tell what to fix.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from models.attention.options import AttentionOptions

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(str(s) for s in t.shape) + ")"


def check_qk(q: torch.Tensor, k: torch.Tensor) -> None:
    """Check that ``q`` and ``k`` are 4-D, float, on one device and agree on batch and d_head.

    Args:
        q: ``batch head_index query_pos d_head``.
        k: ``batch kv_head_index key_pos d_head``.

    Raises:
        ValueError: when a shape, dtype or device does not fit.
    """
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(
                f"{name} must be 4-D (batch, heads, pos, d_head); got shape {_shape(t)}"
            )
        if t.dtype not in SUPPORTED_DTYPES:
            raise ValueError(
                f"{name} has dtype {t.dtype}; supported dtypes are float32, float16 and bfloat16"
            )
    if q.dtype != k.dtype:
        raise ValueError(f"q and k must share one dtype; got {q.dtype} and {k.dtype}")
    if q.device != k.device:
        raise ValueError(f"q and k must be on one device; got {q.device} and {k.device}")
    if q.shape[0] != k.shape[0]:
        raise ValueError(f"batch differs: q has {q.shape[0]}, k has {k.shape[0]}")
    if q.shape[3] != k.shape[3]:
        raise ValueError(f"d_head differs: q has {q.shape[3]}, k has {k.shape[3]}")
    if q.shape[3] == 0:
        raise ValueError("d_head must be at least 1")
    n_heads, n_kv = q.shape[1], k.shape[1]
    if n_kv == 0 or n_heads % n_kv != 0:
        raise ValueError(f"n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv})")


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Check ``q``, ``k`` and ``v`` together (see :func:`check_qk`); ``v`` must match ``k``.

    Args:
        q: ``batch head_index query_pos d_head``.
        k: ``batch kv_head_index key_pos d_head``.
        v: ``batch kv_head_index key_pos d_head``.

    Raises:
        ValueError: when a shape, dtype or device does not fit.
    """
    check_qk(q, k)
    if not isinstance(v, torch.Tensor) or v.dim() != 4:
        got = _shape(v) if isinstance(v, torch.Tensor) else type(v).__name__
        raise ValueError(f"v must be 4-D (batch, n_kv_heads, n_k, d_head); got {got}")
    if v.dtype != k.dtype:
        raise ValueError(f"k and v must share one dtype; got {k.dtype} and {v.dtype}")
    if v.device != k.device:
        raise ValueError(f"k and v must be on one device; got {k.device} and {v.device}")
    if v.shape != k.shape:
        raise ValueError(
            f"v must have the shape of k (batch, n_kv_heads, n_k, d_head) = "
            f"{_shape(k)}; got {_shape(v)}"
        )


def check_options(q: torch.Tensor, k: torch.Tensor, options: AttentionOptions) -> AttentionOptions:
    """Check the options against q and k; return them with the scale made explicit.

    Args:
        q: ``batch head_index query_pos d_head``.
        k: ``batch kv_head_index key_pos d_head``.
        options: the softmax terms (see :class:`AttentionOptions`).

    Raises:
        ValueError: when an option has the wrong type, shape or value.
    """
    scale = options.scale_for(q.shape[3]) if options.scale is None else options.scale
    alibi_slopes, window, key_padding_mask = options.alibi, options.window, options.padding
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite number or None; got {scale!r}")
    if alibi_slopes is not None:
        if not isinstance(alibi_slopes, torch.Tensor) or alibi_slopes.shape != (q.shape[1],):
            got = (
                _shape(alibi_slopes)
                if isinstance(alibi_slopes, torch.Tensor)
                else type(alibi_slopes).__name__
            )
            raise ValueError(f"alibi must have shape (n_heads,) = ({q.shape[1]},); got {got}")
        if not alibi_slopes.is_floating_point():
            raise ValueError(f"alibi must be floating point; got {alibi_slopes.dtype}")
        if alibi_slopes.device != q.device:
            raise ValueError(f"alibi is on {alibi_slopes.device}, q on {q.device}")
    if window is not None and (
        isinstance(window, bool) or not isinstance(window, int) or window < 1
    ):
        raise ValueError(f"window must be an int >= 1 or None; got {window!r}")
    if key_padding_mask is not None:
        expected = (q.shape[0], k.shape[2])
        if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.shape != expected:
            got = (
                _shape(key_padding_mask)
                if isinstance(key_padding_mask, torch.Tensor)
                else type(key_padding_mask).__name__
            )
            raise ValueError(f"padding must have shape (batch, n_k) = {expected}; got {got}")
        if key_padding_mask.dtype != torch.bool:
            raise ValueError(
                f"padding must be bool (True = valid key); got {key_padding_mask.dtype}"
            )
        if key_padding_mask.device != q.device:
            raise ValueError(f"padding is on {key_padding_mask.device}, q on {q.device}")
    softcap = options.softcap
    if softcap is not None and (not isinstance(softcap, (int, float)) or not softcap > 0):
        raise ValueError(f"softcap must be a positive number or None; got {softcap!r}")
    return replace(options, scale=float(scale))


def check_lse(q: torch.Tensor, lse: torch.Tensor) -> None:
    """Check that ``lse`` is the ``batch head_index query_pos`` float32 LSE belonging to ``q``.

    Raises:
        ValueError: when the shape, dtype or device does not fit.
    """
    expected = (q.shape[0], q.shape[1], q.shape[2])
    if not isinstance(lse, torch.Tensor) or lse.shape != expected:
        got = _shape(lse) if isinstance(lse, torch.Tensor) else type(lse).__name__
        raise ValueError(f"lse must have shape (batch, n_heads, n_q) = {expected}; got {got}")
    if lse.dtype != torch.float32:
        raise ValueError(f"lse must be float32; got {lse.dtype}")
    if lse.device != q.device:
        raise ValueError(f"lse is on {lse.device}, q on {q.device}")
