"""Native low precision read from /proc/cpuinfo texts of real CPUs, and measured matmul rates."""

from __future__ import annotations

import math

import pytest

from models.model.hardware import cpu_flags, low_precision, matmul_rate

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu vme sse sse2 avx avx2 fma avx512f avx512dq avx512_bf16 avx512_vnni clzero
bugs\t\t: sysret_ss_attrs
"""
SAPPHIRE_RAPIDS = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu sse avx avx2 avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8
"""
SKYLAKE = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8175M CPU @ 2.50GHz
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl
"""
GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid bf16 i8mm
CPU implementer\t: 0x41
"""


@pytest.mark.parametrize(
    "text, bf16, fp16",
    [
        (ZEN4, "AVX512-BF16", None),
        (SAPPHIRE_RAPIDS, "AMX-BF16 and AVX512-BF16", "AVX512-FP16"),
        (SKYLAKE, None, None),
        (GRAVITON3, "Arm BF16", "Arm FP16"),
        ("", None, None),
    ],
)
def test_native_low_precision_from_cpuinfo(text, bf16, fp16):
    for dtype, want in (("bfloat16", bf16), ("float16", fp16)):
        found = low_precision(dtype, "cpu", cpuinfo=text)
        assert found.native is (want is not None) and found.device == "cpu"
        assert found.how == want if want else "emulated" in found.how


def test_flags_come_from_the_flags_or_features_line_only():
    assert "avx512_bf16" in cpu_flags(ZEN4)
    assert "AuthenticAMD" not in cpu_flags(ZEN4)  # vendor_id is not a flag
    assert cpu_flags("model name\t: bf16 in a name\n") == set()


def test_no_gpu_is_not_native():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    found = low_precision("bfloat16", "cuda")
    assert not found.native and found.how == "no CUDA GPU"


def test_matmul_rate_is_a_measured_positive_number():
    rate = matmul_rate("float32", size=128, repeats=1)
    assert math.isfinite(rate) and rate > 0.01
