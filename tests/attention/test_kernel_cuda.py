"""The Triton kernel compiled for the GPU it runs on, against the float64 reference: float32,
float16 and bfloat16, the interpreter's cases and longer rows. Without a CUDA GPU every test
here is skipped (``benchmarks/gpu.sh`` runs them where one is)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from models.attention import attention, choose_backend, naive_attention
from tests.attention.test_kernel import INTERPRETER_CASES, TOL, errors, make_case

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU: the compiled kernel runs only on one"
)

CASES = {
    **INTERPRETER_CASES,
    "long-causal-gqa": (2, 8, 2, 1000, 1000, 64, {"causal": True}),
    "long-d128-nq<nk": (1, 4, 4, 333, 1500, 128, {}),
    "long-window-alibi": (1, 4, 2, 700, 700, 64, {"causal": True, "window": 100, "alibi": True}),
}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def on_gpu(q, k, v, opts):
    """The case on the GPU, its ALiBi slopes and padding mask with it."""
    moved = replace(
        opts,
        alibi=None if opts.alibi is None else opts.alibi.cuda(),
        padding=None if opts.padding is None else opts.padding.cuda(),
    )
    return q.cuda(), k.cuda(), v.cuda(), moved


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", list(CASES))
def test_compiled_kernel_matches_the_float64_reference(name, dtype):
    """float32 runs ``ieee`` dots: within 1e-5 of float64. A half type rounds its inputs and
    its weights: the kernel may be off by twice what naive attention computed in that type is
    (plus 1e-3 for rows where that is near 0)."""
    *shape, opts = CASES[name]
    q, k, v, opts = on_gpu(*make_case(*shape, dtype=DTYPES[dtype], **opts))
    assert choose_backend(q, "triton") == "triton-gpu"
    out, lse = attention(q, k, v, opts, backend="triton")
    assert out.dtype == q.dtype and lse.dtype == torch.float32
    ref_out, ref_lse, _ = naive_attention(q, k, v, opts)
    err_out, err_lse = errors(out.cpu(), lse.cpu(), ref_out.cpu(), ref_lse.cpu())
    if dtype == "float32":
        assert err_out < TOL and err_lse < TOL
    else:
        base, _, _ = naive_attention(q, k, v, opts, compute_dtype=q.dtype)
        base_err = (base.double() - ref_out).abs().max().item()
        assert err_out <= 2 * base_err + 1e-3
