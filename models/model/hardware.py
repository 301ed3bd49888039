"""What this machine computes fast: native bfloat16 / float16 on its CPU or GPU, and measured
matrix-multiply rates.

A CPU without native bfloat16 instructions emulates them, so a model loaded in bfloat16 runs
slower than in float32 there; with AVX512-BF16 or AMX-BF16 (or bf16 on Arm) bfloat16 matrix
products run several times faster than float32. The sidebar reads :func:`low_precision` to offer
bfloat16 as the fast choice or to say it will be slower; :func:`matmul_rate` measures it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from models.model.spec import TORCH_DTYPES, Device

CPUINFO = Path("/proc/cpuinfo")
HalfType = Literal["bfloat16", "float16"]
# /proc/cpuinfo flags (x86 "flags", Arm "Features") that give each type native matrix products
NATIVE_FLAGS: dict[str, dict[str, str]] = {
    "bfloat16": {"amx_bf16": "AMX-BF16", "avx512_bf16": "AVX512-BF16", "bf16": "Arm BF16"},
    "float16": {"amx_fp16": "AMX-FP16", "avx512_fp16": "AVX512-FP16", "fphp": "Arm FP16"},
}


@dataclass(frozen=True)
class LowPrecision:
    """Whether a device multiplies matrices natively in a low-precision type.

    Attributes:
        dtype: ``bfloat16`` or ``float16``.
        device: ``cpu`` or ``cuda``.
        native: the hardware has instructions for it (else it is emulated: slower than float32).
        how: the instruction set or GPU that provides it, or why not, in words.
    """

    dtype: str
    device: str
    native: bool
    how: str


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` text (read from the file when None;
    empty where it cannot be read)."""
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return set()
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip().lower() in ("flags", "features"):
            flags.update(value.split())
    return flags


def low_precision(
    dtype: HalfType = "bfloat16", device: Device = "cpu", cpuinfo: str | None = None
) -> LowPrecision:
    """Whether ``device`` runs ``dtype`` matrix products natively.

    Args:
        dtype: ``bfloat16`` or ``float16``.
        device: ``cpu`` (from the CPU's flags) or ``cuda`` (from the GPU's compute capability).
        cpuinfo: ``/proc/cpuinfo`` text to read instead of the machine's (for tests).
    """
    if device == "cuda":
        if not torch.cuda.is_available():
            return LowPrecision(dtype, device, False, "no CUDA GPU")
        major, minor = torch.cuda.get_device_capability()
        name = torch.cuda.get_device_name()
        native = major >= 8 if dtype == "bfloat16" else major >= 6  # Ampere / Pascal
        return LowPrecision(dtype, device, native, f"{name} (compute {major}.{minor})")
    flags = cpu_flags(cpuinfo)
    found = [label for flag, label in NATIVE_FLAGS[dtype].items() if flag in flags]
    if found:
        return LowPrecision(dtype, device, True, " and ".join(found))
    why = f"this CPU has no {dtype} instructions: it is emulated, slower than float32"
    return LowPrecision(dtype, device, False, why)


def matmul_rate(
    dtype: str = "float32", size: int = 2048, repeats: int = 3, device: Device = "cpu"
) -> float:
    """Measured GFLOP/s of a ``size x size`` matrix product in ``dtype`` (best of ``repeats``
    after one warm-up). Costs ``(repeats + 1) * 2 size^3`` FLOPs: about 0.5 s at 2,048 in
    float32 on two cores."""
    torch_dtype = TORCH_DTYPES[dtype]
    a = torch.randn(size, size, device=device).to(torch_dtype)
    b = torch.randn(size, size, device=device).to(torch_dtype)
    best = float("inf")
    for _ in range(repeats + 1):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        torch.matmul(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best / 1e9


def matmul_rates(
    dtypes: tuple[str, ...] = ("float32", "bfloat16"),
    size: int = 2048,
    repeats: int = 3,
    device: Device = "cpu",
) -> dict[str, float]:
    """:func:`matmul_rate` for each dtype, ``{dtype: GFLOP/s}``."""
    return {dtype: matmul_rate(dtype, size, repeats, device) for dtype in dtypes}
