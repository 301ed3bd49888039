"""The app's attention kernel against an independent float64 reference.

The tiled PyTorch path runs in-process. The Triton kernel runs in Triton's CPU interpreter in a
subprocess, because ``TRITON_INTERPRET=1`` must be set before the kernel is decorated.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.attention import (
    AttentionOptions,
    attention,
    choose_backend,
    naive_attention,
    rebuild_pattern,
)
from models.attention.tiled import tiled_attention

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-5


def make_case(
    b,
    h,
    kv,
    nq,
    nk,
    d,
    *,
    dtype=torch.float32,
    seed=0,
    alibi=False,
    pad=False,
    strided=False,
    **opts,
):
    """Random q, k, v and the attention options for one case (ALiBi slopes / padding drawn
    here; ``opts`` are the other fields of :class:`AttentionOptions`).

    ``strided`` makes q, k, v transposed views of ``batch pos head_index d_head`` tensors, the
    layout TransformerLens hooks give.
    """
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(b, m, n, d, generator=gen).to(dtype).transpose(1, 2)
        if strided
        else torch.randn(b, n, m, d, generator=gen).to(dtype)
        for n, m in ((h, nq), (kv, nk), (kv, nk))
    )
    if alibi:
        opts["alibi"] = torch.tensor([2.0 ** (-8 * (i + 1) / h) for i in range(h)])
    if pad:
        opts["padding"] = torch.rand(b, nk, generator=gen) > 0.3
    return q, k, v, AttentionOptions(**opts)


def errors(out, lse, ref_out, ref_lse):
    """Max |out - ref| and max |lse - ref| over finite rows; checks -inf rows agree."""
    assert not out.isnan().any() and not lse.isnan().any()
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
    finite = torch.isfinite(ref_lse)
    err_lse = (lse.double() - ref_lse)[finite].abs().max().item() if finite.any() else 0.0
    return (out.double() - ref_out).abs().max().item(), err_lse


# (batch, heads, kv_heads, n_q, n_k, d_head, options)
FP32_CASES = {
    "single-token": (1, 1, 1, 1, 1, 16, {}),
    "n17-d64-causal": (2, 4, 4, 17, 17, 64, {"causal": True}),
    "n129-d128-gqa2": (1, 8, 4, 129, 129, 128, {}),
    "gqa4-causal-nq>nk": (1, 8, 2, 129, 17, 64, {"causal": True}),
    "mqa8-causal-nq<nk": (1, 8, 1, 17, 129, 16, {"causal": True}),
    "n1000-causal": (1, 2, 1, 1000, 1000, 16, {"causal": True}),
    "n1000-pad-window": (1, 2, 2, 1000, 1000, 16, {"pad": True, "window": 100}),
    "alibi-causal-gqa2": (2, 4, 2, 129, 129, 64, {"causal": True, "alibi": True}),
    "alibi-noncausal": (1, 4, 4, 17, 40, 16, {"alibi": True}),
    "window-causal-mqa": (1, 4, 1, 129, 129, 32, {"causal": True, "window": 16}),
    "window-noncausal": (1, 2, 2, 40, 33, 16, {"window": 5}),
    "all-options-gqa4": (
        1,
        8,
        2,
        129,
        160,
        64,
        {"causal": True, "window": 37, "alibi": True, "pad": True},
    ),
    "window1-causal": (1, 2, 1, 17, 30, 16, {"causal": True, "window": 1}),
    "custom-scale": (2, 2, 2, 17, 129, 64, {"scale": 0.5}),
    "strided-gqa2": (2, 4, 2, 129, 129, 32, {"causal": True, "strided": True}),
}


@pytest.mark.parametrize("case", FP32_CASES.values(), ids=FP32_CASES.keys())
def test_tiled_fp32_matches_float64_reference(case):
    *shape, opts = case
    q, k, v, opts = make_case(*shape, **opts)
    kept = [t.clone() for t in (q, k, v)]
    out, lse = attention(q, k, v, opts, backend="torch")
    ref_out, ref_lse, _ = naive_attention(q, k, v, opts)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
    err_out, err_lse = errors(out, lse, ref_out, ref_lse)
    assert err_out < TOL and err_lse < TOL
    assert all(torch.equal(a, b) for a, b in zip(kept, (q, k, v), strict=True))  # inputs untouched


def test_tiled_small_blocks_skip_and_split_correctly():
    q, k, v, opts = make_case(1, 4, 2, 50, 70, 16, causal=True, window=9, alibi=True)
    out, lse = tiled_attention(q, k, v, replace(opts, scale=0.25), block_m=11, block_n=7)
    ref_out, ref_lse, _ = naive_attention(q, k, v, replace(opts, scale=0.25))
    assert max(errors(out, lse, ref_out, ref_lse)) < TOL


def test_worked_example_a_from_reference_sheet():
    q = torch.tensor([[1.0, 2.0], [0.0, -1.0]])[None, None]
    k = torch.tensor([[2.0, 0.0], [1.0, 1.0]])[None, None]
    v = torch.tensor([[10.0, 20.0], [30.0, 40.0]])[None, None]
    out, lse = attention(q, k, v)
    expected = torch.tensor([[23.3952, 33.3952], [16.6048, 26.6048]])
    torch.testing.assert_close(out[0, 0], expected, atol=1e-4, rtol=0)
    s = torch.tensor([[2.0, 3.0], [0.0, -1.0]]) / math.sqrt(2)
    torch.testing.assert_close(lse[0, 0], torch.logsumexp(s, -1), atol=1e-6, rtol=0)


def test_window_one_copies_the_aligned_value():
    q, k, v, _ = make_case(1, 2, 2, 3, 5, 16)
    out, lse = attention(q, k, v, AttentionOptions(causal=True, window=1))
    torch.testing.assert_close(out, v[:, :, 2:], atol=1e-6, rtol=0)  # query i sees key i + 2
    s = (q * k[:, :, 2:]).sum(-1) / 4.0
    torch.testing.assert_close(lse, s, atol=1e-5, rtol=0)


def test_fully_masked_rows_give_zero_and_minus_inf():
    q, k, v, _ = make_case(2, 2, 1, 6, 4, 16)
    mask = torch.tensor([[False] * 4, [True, False, True, True]])
    out, lse = attention(q, k, v, AttentionOptions(causal=True, padding=mask))
    assert not out.isnan().any() and not lse.isnan().any()
    assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.isneginf(lse[0]).all()
    # causal, n_q=6 > n_k=4: queries 0 and 1 sit before the first key.
    assert torch.equal(out[1, :, :2], torch.zeros_like(out[1, :, :2]))
    assert torch.isneginf(lse[1, :, :2]).all() and torch.isfinite(lse[1, :, 2:]).all()
    ref_out, ref_lse, _ = naive_attention(q, k, v, AttentionOptions(causal=True, padding=mask))
    assert max(errors(out, lse, ref_out, ref_lse)) < TOL


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize(
    "case",
    [
        (2, 4, 2, 129, 129, 64, {"causal": True}),
        (1, 8, 1, 200, 150, 128, {"alibi": True, "pad": True}),
        (1, 4, 4, 65, 65, 16, {"causal": True, "window": 20}),
    ],
    ids=["gqa2-causal", "mqa-alibi-pad", "window"],
)
def test_half_precision_within_twice_naive_error(case, dtype):
    *shape, opts = case
    q, k, v, opts = make_case(*shape, dtype=dtype, **opts)
    out, lse = attention(q, k, v, opts, backend="torch")
    assert out.dtype == dtype and lse.dtype == torch.float32
    ref_out, ref_lse, _ = naive_attention(q, k, v, opts)
    base_out, _, _ = naive_attention(q, k, v, opts, compute_dtype=dtype)
    err_out, err_lse = errors(out, lse, ref_out, ref_lse)
    base_err = (base_out.double() - ref_out).abs().max().item()
    assert err_out <= 2 * base_err + 1e-3
    assert err_lse < 1e-4  # LSE is accumulated in float32 from the same rounded inputs


@settings(max_examples=25, deadline=None)
@given(
    nq=st.integers(1, 40),
    nk=st.integers(1, 40),
    group=st.sampled_from([1, 2, 4]),
    causal=st.booleans(),
    window=st.one_of(st.none(), st.integers(1, 45)),
    alibi=st.booleans(),
    pad=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_tiled_random_shapes(nq, nk, group, causal, window, alibi, pad, seed):
    q, k, v, opts = make_case(
        2, 2 * group, 2, nq, nk, 16, seed=seed, causal=causal, window=window, alibi=alibi, pad=pad
    )
    out, lse = tiled_attention(q, k, v, replace(opts, scale=0.25), block_m=8, block_n=8)
    ref_out, ref_lse, _ = naive_attention(q, k, v, replace(opts, scale=0.25))
    assert max(errors(out, lse, ref_out, ref_lse)) < TOL


@pytest.mark.parametrize(
    "rows, cols",
    [
        (slice(None), slice(None)),
        (slice(40, 90), slice(10, 150, 3)),
        (torch.tensor([0, 5, 128]), [-1, 0, 77]),
    ],
    ids=["whole", "slices", "indices"],
)
def test_rebuild_pattern_matches_naive_pattern(rows, cols):
    q, k, v, opts = make_case(2, 8, 2, 129, 160, 32, causal=True, window=60, alibi=True, pad=True)
    _, lse = attention(q, k, v, opts)
    got = rebuild_pattern(q, k, lse, rows, cols, opts)
    _, _, pattern = naive_attention(q, k, v, opts)
    r = torch.arange(129)[rows]
    c = torch.arange(160)[torch.as_tensor(cols) if isinstance(cols, list) else cols]
    want = pattern[:, :, r][:, :, :, c]
    assert got.shape == want.shape
    assert (got.double() - want).abs().max().item() < TOL


def test_choose_backend_on_cpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    q = torch.zeros(1, 1, 2, 16)
    assert choose_backend(q) == "torch-tiled"
    assert choose_backend(q, "torch") == "torch-tiled"
    if "models.attention.triton_kernel" not in sys.modules:
        with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
            choose_backend(q, "triton")
    with pytest.raises(ValueError, match="backend must be one of"):
        choose_backend(q, "cuda")


def _bad(**change):
    """q, k, v and options for one bad call: tensors and option fields changed by name."""
    tensors = {
        "q": torch.zeros(2, 4, 5, 16),
        "k": torch.zeros(2, 2, 7, 16),
        "v": torch.zeros(2, 2, 7, 16),
    }
    fields = {name: value for name, value in change.items() if name not in tensors}
    tensors.update({name: value for name, value in change.items() if name in tensors})
    return {**tensors, "options": AttentionOptions(**fields)}


@pytest.mark.parametrize(
    "args, message",
    [
        (_bad(q=torch.zeros(4, 5, 16)), "q must be 4-D"),
        (_bad(k=torch.zeros(3, 2, 7, 16)), "batch differs"),
        (_bad(k=torch.zeros(2, 2, 7, 8)), "d_head differs"),
        (_bad(v=torch.zeros(2, 2, 6, 16)), "v must have the shape of k"),
        (_bad(k=torch.zeros(2, 3, 7, 16), v=torch.zeros(2, 3, 7, 16)), "multiple of n_kv_heads"),
        (_bad(q=torch.zeros(2, 4, 5, 16, dtype=torch.int64)), "supported dtypes"),
        (_bad(v=torch.zeros(2, 2, 7, 16, dtype=torch.float16)), "share one dtype"),
        (_bad(window=0), "window must be an int >= 1"),
        (_bad(window=2.5), "window must be an int >= 1"),
        (_bad(alibi=torch.ones(2)), r"alibi must have shape \(n_heads,\)"),
        (_bad(padding=torch.ones(2, 5, dtype=torch.bool)), "padding must have"),
        (_bad(padding=torch.ones(2, 7)), "padding must be bool"),
        (_bad(scale=float("nan")), "scale must be a finite number"),
        (_bad(softcap=-1.0), "softcap must be a positive number"),
    ],
    ids=[
        "not-4d",
        "batch",
        "d_head",
        "v-shape",
        "gqa-ratio",
        "int-dtype",
        "mixed-dtype",
        "window-0",
        "window-float",
        "slopes-shape",
        "mask-shape",
        "mask-dtype",
        "scale-nan",
        "softcap-negative",
    ],
)
def test_bad_input_raises_value_error(args, message):
    with pytest.raises(ValueError, match=message):
        attention(**args)


def test_rebuild_pattern_rejects_bad_lse_and_indices():
    q, k = torch.zeros(1, 2, 4, 16), torch.zeros(1, 2, 4, 16)
    with pytest.raises(ValueError, match="lse must have shape"):
        rebuild_pattern(q, k, torch.zeros(1, 2, 3), slice(None), slice(None))
    with pytest.raises(ValueError, match="cols indexes outside"):
        rebuild_pattern(q, k, torch.zeros(1, 2, 4), slice(None), [9])


# ---- Triton kernel in the CPU interpreter (subprocess: the env var must precede the import) ----

INTERPRETER_CASES = {
    "plain": (1, 2, 2, 17, 17, 16, {}),
    "causal-ragged": (2, 2, 2, 33, 21, 32, {"causal": True}),
    "causal-nq<nk": (1, 2, 2, 9, 40, 16, {"causal": True}),
    "gqa4": (1, 8, 2, 20, 31, 16, {}),
    "mqa-causal": (1, 4, 1, 25, 25, 32, {"causal": True}),
    "alibi-causal": (1, 4, 2, 30, 30, 16, {"causal": True, "alibi": True}),
    "alibi-noncausal": (1, 2, 2, 19, 27, 16, {"alibi": True}),
    "window-causal": (1, 2, 1, 40, 40, 16, {"causal": True, "window": 7}),
    "window-noncausal": (1, 2, 2, 35, 29, 16, {"window": 4}),
    "padding": (3, 2, 1, 18, 30, 32, {"pad": True, "causal": True}),
    "d24-scale": (1, 2, 2, 5, 9, 24, {"scale": 0.3}),
    "strided-gqa2": (2, 4, 2, 21, 21, 16, {"causal": True, "strided": True}),
}

_INTERPRETER_SCRIPT = """
import importlib.util, json, sys
import torch
import triton
from models.attention import attention, choose_backend, naive_attention
spec = importlib.util.spec_from_file_location("kernel_cases", sys.argv[1])
cases = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cases)
INTERPRETER_CASES, errors, make_case = cases.INTERPRETER_CASES, cases.errors, cases.make_case
results = {"triton": triton.__version__}
for name, (*shape, opts) in INTERPRETER_CASES.items():
    q, k, v, opts = make_case(*shape, **opts)
    try:
        out, lse = attention(q, k, v, opts, backend="triton")
        ref_out, ref_lse, _ = naive_attention(q, k, v, opts)
        results[name] = [choose_backend(q, "triton"), *errors(out, lse, ref_out, ref_lse)]
    except Exception as err:  # reported by the test of this case
        results[name] = [f"{type(err).__name__}: {err}", None, None]
for dtype in (torch.float16, torch.bfloat16):
    q, k, v, opts = make_case(1, 4, 2, 24, 24, 16, dtype=dtype, causal=True)
    out, _ = attention(q, k, v, opts, backend="triton")
    ref_out, _, _ = naive_attention(q, k, v, opts)
    base_out, _, _ = naive_attention(q, k, v, opts, compute_dtype=dtype)
    results[str(dtype)] = [(out.double() - ref_out).abs().max().item(),
                           (base_out.double() - ref_out).abs().max().item()]
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def interpreted():
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", _INTERPRETER_SCRIPT, __file__],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", INTERPRETER_CASES)
def test_triton_interpreter_fp32_matches_reference(interpreted, name):
    backend, err_out, err_lse = interpreted[name]
    assert backend == "triton-interpreter", backend  # else: the error raised in the subprocess
    assert err_out < TOL and err_lse < TOL


@pytest.mark.parametrize("dtype", ["torch.float16", "torch.bfloat16"])
def test_triton_interpreter_half_precision(interpreted, dtype):
    err, base_err = interpreted[dtype]
    assert err <= 2 * base_err + 1e-3


# ---- The same kernel compiled ahead of time for Hopper (sm_90): no GPU needed, catches code
# ---- that the interpreter accepts but the compiler rejects.

_COMPILE_SCRIPT = """
import json
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
from triton.compiler.errors import CompilationError
from models.attention.triton_kernel import _attn_fwd

POINTERS = {"Lse": "*fp32", "Slopes": "*fp32", "KeyMask": "*i8"}
results = {}
for dtype, options in (("fp16", dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, CAUSAL=True,
                                     HAS_ALIBI=True, HAS_WINDOW=True, HAS_KEY_MASK=True)),
                       ("bf16", dict(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=128, CAUSAL=False,
                                     HAS_ALIBI=False, HAS_WINDOW=False, HAS_KEY_MASK=False))):
    constexprs = dict(options, INPUT_PRECISION="tf32", DOT_IN_FP32=False)
    signature = {name: "constexpr" if name in constexprs else
                 POINTERS.get(name, f"*{dtype}" if name in ("Q", "K", "V", "Out") else
                              "fp32" if name == "qk_scale" else "i32")
                 for name in _attn_fwd.fn.arg_names}
    try:
        kernel = compile(ASTSource(_attn_fwd.fn, signature, constexprs=constexprs),
                         target=GPUTarget("cuda", 90, 32), options=dict(num_warps=8, num_stages=3))
        results[dtype] = "ok" if "wgmma" in kernel.asm["ptx"] else "compiled without wgmma"
    except CompilationError as err:
        results[dtype] = f"error: {err}"
    except Exception as err:  # no CUDA toolchain in this triton build
        results[dtype] = f"skip: {type(err).__name__}: {err}"
print(json.dumps(results))
"""


@pytest.mark.slow
def test_kernel_compiles_for_hopper():
    env = {key: val for key, val in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    if all(r.startswith("skip") for r in results.values()):
        pytest.skip(f"cannot compile for CUDA here: {results}")
    assert results == {"fp16": "ok", "bf16": "ok"}


def test_soft_capped_logits_match_the_reference_and_the_formula():
    """Gemma 2's cap ``c * tanh(s / c)``: the tiled path and the naive reference agree, and the
    reference's pattern is the softmax of the capped logits computed here by hand."""
    q, k, v, opts = make_case(1, 4, 2, 23, 23, 16, causal=True)
    capped = replace(opts, scale=0.7, softcap=3.0)
    out, lse = attention(q, k, v, capped, backend="torch")
    ref_out, ref_lse, pattern = naive_attention(q, k, v, capped)
    err_out, err_lse = errors(out, lse, ref_out, ref_lse)
    assert err_out < TOL and err_lse < TOL
    logits = q.double() @ k.double().repeat_interleave(2, dim=1).transpose(-1, -2) * 0.7
    logits = 3.0 * torch.tanh(logits / 3.0)
    logits = logits.masked_fill(torch.ones(23, 23, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(pattern, torch.softmax(logits, dim=-1), atol=1e-12, rtol=0)
    assert (pattern - naive_attention(q, k, v, replace(opts, scale=0.7))[2]).abs().max() > 0.01
