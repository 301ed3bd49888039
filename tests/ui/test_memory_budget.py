"""One memory budget: model-sized results (kernel reports, the scaling sweep's logits) of many
distinct prompts go into the byte-bounded store, and the process's resident memory stays within
that budget plus a stated allocator margin, although everything computed would be several times
larger."""

import gc

import pytest

from models.attention.check import check_kernel
from models.scaling.capture import capture_scores
from ui.runtime.janitor import release_memory
from ui.runtime.store import ResultStore, size_of

BUDGET = 8 * 1024**2
# Freed arrays do not all go back to the system at once (glibc keeps some arenas): allowed above
# the budget, and far below what the results would hold without eviction.
MARGIN = 32 * 1024**2
PROMPTS = [
    f"def f{i}(values, n={i}):\n    total = sum(values[:n]) * {i}\n    return total / n\n" * 4
    for i in range(16)
]


def rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def settled_rss() -> int:
    gc.collect()
    release_memory()
    return rss_bytes()


@pytest.mark.integration
def test_model_sized_results_stay_within_the_store_budget(bundled):
    store = ResultStore(max_entries=10_000, max_bytes=BUDGET)
    check_kernel(bundled, PROMPTS[0])  # warm up the kernel path and its allocations
    capture_scores(bundled, PROMPTS[0])
    baseline = settled_rss()
    computed = 0
    for i, prompt in enumerate(PROMPTS):
        report = check_kernel(bundled, prompt)
        logits = capture_scores(bundled, prompt)
        computed += size_of(report) + size_of(logits)
        store.put(("kernel", i), report)
        store.put(("logits", i), logits)
        del report, logits
    assert computed > 3 * BUDGET  # without eviction the store would hold all of it
    assert store.nbytes <= BUDGET
    assert 0 < len(store) < 2 * len(PROMPTS)
    grown = settled_rss() - baseline
    assert grown <= BUDGET + MARGIN, f"resident memory grew {grown / 2**20:.0f} MiB"
