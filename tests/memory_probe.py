"""The peak memory a piece of work adds, measured in a fresh Python process.

Memory estimates are checked against this: the process sets the C allocator as the server
does (:func:`models.model.allocator.keep_freed_blocks`), runs ``setup`` (load a model, warm it
up with a small run of the same work), hands freed memory back, then resets the kernel's
resident-memory high-water mark (``/proc/self/clear_refs``) and runs ``work``. What it reports
is what ``work`` added at its peak: the larger of two readings that can each only fall short of
it. One is the kernel's high-water mark of resident memory above what was resident just before,
less the file-backed pages that came back meanwhile (a busy machine takes back pages of the
mapped libraries and model files, and the work reads them in again: memory the work did not
add; the reading can fall short when such pages go again before the end); the other
is the most anonymous memory (``RssAnon``: the heap and tensors, not mapped files) a thread saw
while sampling every millisecond, above what was held before (it can miss a short peak). A fresh
process per measurement, so no earlier test's heap is reused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The start of an estimate test's setup: the model named ``{name}`` loaded, ``text`` a prompt
# of ``{n}`` tokens, and ``setup_of`` building a circuits task (clean and corrupted runs) on it.
MODEL_SETUP = """
from models.circuits import CircuitTask, prepare
from models.head import Head
from models.model.loading import load
from models.model.spec import ModelSpec
from tests.generate.long_text import long_prompt

model = load(ModelSpec({name!r}))
N = {n}
text = long_prompt(model, N)

def setup_of(text):
    return prepare(model, CircuitTask(
        text + " and then he went to the", text + " and then we went to the", " the", " a"
    ))
"""

_SCRIPT = """
import ctypes, gc, json, os, sys
from models.model.allocator import keep_freed_blocks
keep_freed_blocks()

def status(name):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(name)

{setup}
import threading, time
result = None
gc.collect()
ctypes.CDLL("libc.so.6").malloc_trim(0)
before = status("RssAnon")
resident = status("VmRSS")
files = status("RssFile")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
most = [before]
done = threading.Event()

def sample():
    while not done.is_set():
        most[0] = max(most[0], status("RssAnon"))
        time.sleep(0.001)

sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
{work}
done.set()
sampler.join()
most[0] = max(most[0], status("RssAnon"))
refaulted = max(0, status("RssFile") - files)  # file pages the kernel took back, read again
peak = max(most[0] - before, status("VmHWM") - resident - refaulted)
print("PEAK " + json.dumps({{"peak": peak, "result": result}}))
"""


def peak_bytes(setup: str, work: str, timeout_s: float = 900.0) -> tuple[int, object]:
    """Bytes ``work`` added at its peak, and the JSON value it left in ``result``.

    Args:
        setup: Python run first (imports, loading, warming up); not measured.
        work: Python run under measurement; it may set ``result`` to something JSON can hold.
    """
    script = _SCRIPT.format(setup=textwrap.dedent(setup), work=textwrap.dedent(work))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=ROOT,  # `python -c` puts the working folder first on its path: the project's root
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("PEAK ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the measured process failed:\n{done.stderr[-4000:]}")
    found = json.loads(lines[-1][5:])
    return int(found["peak"]), found["result"]


def peak_and_estimate(
    setup: str,
    work: dict[str, tuple[str, str]],
    kind: str,
    n: int,
    *,
    same_length: bool = True,
    **fields: object,
) -> tuple[int, int]:
    """The peak of ``work[kind]`` and the estimate it reports (``result["estimate"]``).

    ``work[kind]`` is ``(warm-up, measured work)``: the warm-up goes into ``setup``'s
    ``{warm}`` field, beside ``n`` and ``fields``. With ``same_length``, the work must report
    a length (``result["n"]``) within 8 tokens of ``n``, so a prompt cut short cannot pass for
    the length asked for.
    """
    warm, measured = work[kind]
    peak, found = peak_bytes(setup.format(warm=warm, n=n, **fields), measured)
    assert isinstance(found, dict), found
    assert not same_length or abs(found["n"] - n) <= 8, (found["n"], n)
    return peak, int(found["estimate"])


MIB = 2**20
GRAIN = 8 * MIB
"""What the allocator may add to a few-MiB job beyond its arrays: the bundled model's estimates
are checked on their upper side within it."""


def under_estimate(kind: str, n: int, peak: int, estimate: int) -> None:
    """Print the pair and check the upper side only, within :data:`GRAIN`."""
    print(f"{kind} at {n:,} tokens: measured {peak / MIB:.1f} MiB, estimate {estimate / MIB:.1f}")
    assert peak <= estimate + GRAIN, (peak / MIB, estimate / MIB)


def within_estimate(kind: str, n: int, peak: int, estimate: int) -> None:
    """Print the pair and check both sides: measured <= estimate <= 2 x measured."""
    print(f"{kind} at {n:,} tokens: measured {peak / MIB:.1f} MiB, estimate {estimate / MIB:.1f}")
    assert peak <= estimate <= 2 * peak, (peak / MIB, estimate / MIB)
