"""The circuits jobs' memory, measured in a fresh process against their own estimates.

The job pool refuses work whose estimate is over the operator's limit, so each estimate must
hold: the measured peak under it, and the estimate at most twice the peak (a bound far above
the truth refuses work that would fit). The first job, the clean and corrupted runs, once ran
+2.8 GiB on a server limited to 1 GiB; the weights job measured +1.1 GiB against 0.45 GB.
"""

from __future__ import annotations

import pytest

from tests.memory_probe import peak_bytes

MIB = 2**20

SETUP = """
from models.circuits import CircuitTask, baseline, prepare
from models.circuits.cost import baseline_cost, weights_cost
from models.circuits.findings import weight_findings
from models.model.loading import load
from models.model.spec import ModelSpec
from tests.generate.long_text import long_prompt

model = load(ModelSpec({name!r}))

def setup_of(n):
    text = long_prompt(model, n)
    task = CircuitTask(
        text + " and then he went to the", text + " and then we went to the", " the", " a"
    )
    return prepare(model, task)

setup = setup_of({n})
{warm}
"""

BASELINE = """
found = baseline(model, setup)
result = {"estimate": baseline_cost(model, setup.n_tokens).peak_bytes, "n": setup.n_tokens}
"""

WEIGHTS = """
weight_findings(model, lambda *a: None)
result = {"estimate": weights_cost(model).peak_bytes, "n": 0}
"""


def measure(name: str, n: int, work: str) -> tuple[int, int]:
    warm = "baseline(model, setup_of(8))" if work is BASELINE else WEIGHTS
    peak, found = peak_bytes(SETUP.format(name=name, n=n, warm=warm), work)
    assert isinstance(found, dict)
    return peak, int(found["estimate"])


@pytest.mark.parametrize("n", [40, 120])
@pytest.mark.slow
def test_bundled_clean_and_corrupted_runs_stay_within_their_estimate(n):
    """The safe side only: at the bundled model's size the peak is mostly the allocator's
    arenas, which vary from run to run (61 to 70 MiB at 120 tokens against a 136 MiB
    estimate), so the 2x bound is held on SmolLM2 below, where the work dominates."""
    peak, estimate = measure("bundled", n, BASELINE)
    assert peak <= estimate, (peak / MIB, estimate / MIB)


@pytest.mark.slow
def test_smollm2_clean_and_corrupted_runs_stay_within_their_estimate():
    peak, estimate = measure("smollm2", 1000, BASELINE)
    assert peak <= estimate <= 2 * peak, (peak / MIB, estimate / MIB)


@pytest.mark.slow
def test_smollm2_weights_job_stays_within_its_estimate():
    peak, estimate = measure("smollm2", 8, WEIGHTS)
    assert peak <= estimate <= 2 * peak, (peak / MIB, estimate / MIB)
