"""Freed blocks are reused by the next pass: page faults counted by the kernel, in fresh
processes (the setting is process-wide and glibc's default is the reference)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import resource, sys
import torch
if sys.argv[1] == "keep":
    from models.model.allocator import keep_freed_blocks
    assert keep_freed_blocks() and keep_freed_blocks()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def one_pass():  # a layer's worth of megabyte blocks of mixed sizes, allocated and freed
    for size in (1, 3, 6, 2, 5, 4):
        a = torch.ones(size * 2**18)
        b = torch.ones(size * 2**18 + 7)
        del a, b
for _ in range(4):  # the heap grows to hold the largest pass
    one_pass()
counts = []
for _ in range(3):
    before = faults()
    one_pass()
    counts.append(faults() - before)
print(*counts)
"""


def faults_per_pass(mode: str) -> list[int]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return [int(x) for x in done.stdout.split()]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and ru_minflt")
@pytest.mark.slow
def test_a_pass_reuses_freed_blocks_without_faulting_them_in_again() -> None:
    plain, kept = faults_per_pass("plain"), faults_per_pass("keep")
    # glibc's default unmaps most of these blocks on free: each pass faults in megabytes
    # (a 4 KiB page a fault; the pass touches 2 x 21 MiB)
    assert min(plain) > 1000, plain
    assert max(kept) < 64, kept
