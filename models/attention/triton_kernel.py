"""FlashAttention-style forward kernel in Triton, returning the output and per-row LSE.

Follows the Triton fused-attention tutorial (one program per ``BLOCK_M`` queries of one head,
K/V tiles of ``BLOCK_N`` keys, online softmax in base 2) with these differences: ragged
``n_q``/``n_k`` are masked, ``n_q`` may differ from ``n_k`` (causal is aligned bottom-right, see
:mod:`models.attention.masking`), GQA/MQA index the shared K/V head through strides, ALiBi,
sliding windows and key padding are supported, any float dtype is accepted (float32 dots use
``ieee`` precision, not TF32), and a row with no visible key gives output 0 and LSE -inf.
Under the interpreter, bfloat16 tiles are upcast to float32 before ``tl.dot``: the interpreter
keeps bfloat16 as raw ``uint16`` and its NumPy dot would multiply bit patterns.

Whether the kernel runs compiled or in Triton's interpreter is fixed when this module is imported:
``triton.jit`` reads ``TRITON_INTERPRET`` at decoration time, so set ``TRITON_INTERPRET=1`` before
importing this module to run it on CPU tensors.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from models.attention.options import AttentionOptions
from models.shapes import Keys, Outputs, Queries, RowLse, Values

INTERPRETED = bool(triton.knobs.runtime.interpret)
LOG2E = 1.0 / math.log(2.0)
LN2 = tl.constexpr(math.log(2.0))


def _configs() -> list[triton.Config]:
    """Autotune space for Hopper-class GPUs; one small block in the (slow) interpreter."""
    if INTERPRETED:
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=1, num_stages=1)]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
        for bm in (64, 128)
        for bn in (32, 64, 128)
        for w in (4, 8)
        for s in (2, 3, 4)
    ]


@triton.autotune(
    configs=_configs(),
    key=["CTX_BUCKET", "HEAD_DIM", "CAUSAL", "HAS_WINDOW", "HAS_ALIBI", "HAS_KEY_MASK"],
)
@triton.jit
def _attn_fwd(
    Q,
    K,
    V,
    Out,
    Lse,
    Slopes,
    KeyMask,
    stride_qb,
    stride_qh,
    stride_qm,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_om,
    stride_od,
    stride_lb,
    stride_lh,
    stride_lm,
    stride_mb,
    stride_mn,
    n_heads,
    group_size,
    n_q,
    n_k,
    d_head,
    qk_scale,
    window,
    CTX_BUCKET,  # autotune key only: next power of two of max(n_q, n_k)
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    HAS_ALIBI: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    HAS_KEY_MASK: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = (off_bh // n_heads).to(tl.int64)
    off_h = (off_bh % n_heads).to(tl.int64)
    off_kvh = off_h // group_size
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    mask_d = offs_d < d_head

    q_ptrs = (
        Q
        + off_b * stride_qb
        + off_h * stride_qh
        + offs_m[:, None] * stride_qm
        + offs_d[None, :] * stride_qd
    )
    q = tl.load(q_ptrs, mask=(offs_m[:, None] < n_q) & mask_d[None, :], other=0.0)
    if DOT_IN_FP32:
        q = q.to(tl.float32)
    k_base = K + off_b * stride_kb + off_kvh * stride_kh
    v_base = V + off_b * stride_vb + off_kvh * stride_vh
    slope = 0.0
    if HAS_ALIBI:
        slope = tl.load(Slopes + off_h)  # already multiplied by log2(e)

    # Bottom-right causal alignment: query i sits at key position i + (n_k - n_q).
    shift = n_k - n_q if CAUSAL else 0
    q_at = offs_m + shift
    lo, hi = _key_range(start_m * BLOCK_M + shift, BLOCK_M, n_k, window, CAUSAL, HAS_WINDOW)
    lo = (lo // BLOCK_N) * BLOCK_N

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(lo, hi, BLOCK_N):
        cur_n = start_n + offs_n
        in_k = cur_n < n_k
        kt = tl.load(
            k_base + offs_d[:, None] * stride_kd + cur_n[None, :] * stride_kn,
            mask=mask_d[:, None] & in_k[None, :],
            other=0.0,
        )
        if DOT_IN_FP32:
            kt = kt.to(tl.float32)
        qk = tl.dot(q, kt, input_precision=INPUT_PRECISION) * qk_scale  # log2 units
        rel = q_at[:, None] - cur_n[None, :]
        valid = tl.broadcast_to(in_k[None, :], (BLOCK_M, BLOCK_N))
        if CAUSAL:
            valid = valid & (rel >= 0)
            if HAS_WINDOW:
                valid = valid & (rel < window)
        elif HAS_WINDOW:
            valid = valid & (rel < window) & (rel > -window)
        if HAS_ALIBI:
            dist = rel if CAUSAL else tl.abs(rel)
            qk = qk - slope * dist.to(tl.float32)
        if HAS_KEY_MASK:
            key_ok = tl.load(KeyMask + off_b * stride_mb + cur_n * stride_mn, mask=in_k, other=0)
            valid = valid & (key_ok[None, :] != 0)
        qk = tl.where(valid, qk, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # no valid key yet: avoid NaN
        p = tl.math.exp2(qk - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(
            v_base + cur_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
            mask=in_k[:, None] & mask_d[None, :],
            other=0.0,
        )
        if DOT_IN_FP32:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=INPUT_PRECISION)
        m_i = m_new

    has_key = l_i > 0
    l_safe = tl.where(has_key, l_i, 1.0)
    out = acc / l_safe[:, None]
    lse = tl.where(has_key, (m_i + tl.math.log2(l_safe)) * LN2, float("-inf"))
    o_ptrs = (
        Out
        + off_b * stride_ob
        + off_h * stride_oh
        + offs_m[:, None] * stride_om
        + offs_d[None, :] * stride_od
    )
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=(offs_m[:, None] < n_q) & mask_d[None, :])
    l_ptrs = Lse + off_b * stride_lb + off_h * stride_lh + offs_m * stride_lm
    tl.store(l_ptrs, lse, mask=offs_m < n_q)


@triton.jit
def _key_range(
    first_q_at, BLOCK_M: tl.constexpr, n_k, window, CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr
):
    """Keys [lo, hi) any query of this block may see; blocks outside are skipped."""
    lo = 0
    hi = n_k
    if CAUSAL:
        hi = tl.minimum(n_k, first_q_at + BLOCK_M)
        if HAS_WINDOW:
            lo = tl.maximum(0, first_q_at - window + 1)
    elif HAS_WINDOW:
        lo = tl.maximum(0, first_q_at - window + 1)
        hi = tl.minimum(n_k, first_q_at + BLOCK_M - 1 + window)
    return lo, hi


def triton_attention(
    q: Queries,
    k: Keys,
    v: Values,
    options: AttentionOptions,
) -> tuple[Outputs, RowLse]:
    """Launch the kernel on validated inputs (see :mod:`models.attention.validate`).

    Args:
        q: ``batch head_index query_pos d_head``.
        k: ``batch kv_head_index key_pos d_head``.
        v: ``batch kv_head_index key_pos d_head``.
        options: the softmax terms; the kernel has no soft cap (the tiled path has).

    Returns:
        ``out`` (``batch head_index query_pos d_head``, dtype of q) and ``lse``
        (``batch head_index query_pos`` float32, natural log).
    """
    if options.softcap is not None:
        raise ValueError("the Triton kernel has no soft cap; run the torch backend")
    causal, window, key_padding_mask = options.causal, options.window, options.padding
    alibi_slopes, scale = options.alibi, options.scale_for(q.shape[3])
    b, n_heads, n_q, d = q.shape
    n_kv, n_k = k.shape[1], k.shape[2]
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((b, n_heads, n_q), dtype=torch.float32, device=q.device)
    slopes = lse if alibi_slopes is None else (alibi_slopes.to(torch.float32) * LOG2E).contiguous()
    key_mask = lse if key_padding_mask is None else key_padding_mask.to(torch.int8)
    mask_strides = (0, 0) if key_padding_mask is None else key_mask.stride()
    # The interpreter stores bfloat16 as raw uint16 and its dot would multiply the bit patterns.
    dot_in_fp32 = INTERPRETED and q.dtype == torch.bfloat16
    grid = lambda meta: (triton.cdiv(n_q, meta["BLOCK_M"]), b * n_heads)
    _attn_fwd[grid](
        q,
        k,
        v,
        out,
        lse,
        slopes,
        key_mask,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *out.stride(),
        *lse.stride(),
        *mask_strides,
        n_heads,
        n_heads // n_kv,
        n_q,
        n_k,
        d,
        scale * LOG2E,
        window or 0,
        triton.next_power_of_2(max(n_q, n_k)),
        HEAD_DIM=max(16, triton.next_power_of_2(d)),
        CAUSAL=causal,
        HAS_ALIBI=alibi_slopes is not None,
        HAS_WINDOW=window is not None,
        HAS_KEY_MASK=key_padding_mask is not None,
        INPUT_PRECISION="ieee" if q.dtype == torch.float32 or dot_in_fp32 else "tf32",
        DOT_IN_FP32=dot_in_fp32,
    )
    return out, lse
