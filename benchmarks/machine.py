"""The machine a benchmark ran on, for its report: the CPU's model name and which bfloat16 matrix
instructions it has (AMX, AVX512-BF16 or neither, from the flags in ``/proc/cpuinfo``), read at
run time, beside the matmul rates measured in the same process. Numbers from an AMX machine, an
AVX512-BF16 one and one with neither differ by several times in bfloat16, so every figure
carries them.
"""

from __future__ import annotations

import os
from typing import Literal

import torch

from models.model.hardware import CPUINFO, cpu_flags, matmul_rates

CpuKind = Literal["AMX", "AVX512-BF16", "neither"]


def cpuinfo_text() -> str:
    try:
        return CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_name(cpuinfo: str | None = None) -> str:
    """The first ``model name`` line of ``/proc/cpuinfo`` (x86), else ``unknown``."""
    text = cpuinfo_text() if cpuinfo is None else cpuinfo
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip().lower() == "model name" and value.strip():
            return value.strip()
    return "unknown"


def cpu_kind(cpuinfo: str | None = None) -> CpuKind:
    """``AMX`` (AMX-BF16 tiles), else ``AVX512-BF16``, else ``neither``."""
    flags = cpu_flags(cpuinfo_text() if cpuinfo is None else cpuinfo)
    if "amx_bf16" in flags:
        return "AMX"
    if "avx512_bf16" in flags:
        return "AVX512-BF16"
    return "neither"


def describe(rates: bool = True, dtypes: tuple[str, ...] = ("float32", "bfloat16")) -> dict:
    """CPU name and kind, cores, torch threads and version, and (``rates``) the measured
    2,048² matmul rates in ``dtypes`` (GFLOP/s; about a second each, much longer for bfloat16
    on a CPU that emulates it)."""
    out: dict = {
        "cpu": cpu_name(),
        "cpu_kind": cpu_kind(),
        "cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    if rates:
        out["matmul_gflops"] = {k: round(v, 1) for k, v in matmul_rates(dtypes).items()}
    return out


def line(machine: dict) -> str:
    """One line for a report: ``AMD EPYC (neither), 2 threads, matmul float32 37 / bfloat16 9
    GFLOP/s``."""
    rates = machine.get("matmul_gflops", {})
    measured = " / ".join(f"{k} {v:.0f}" for k, v in rates.items())
    tail = f", matmul {measured} GFLOP/s" if measured else ""
    return f"{machine['cpu']} ({machine['cpu_kind']}), {machine['threads']} threads{tail}"
