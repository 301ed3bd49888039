"""Each job's memory estimate against its peak, measured in a fresh process
(:func:`tests.memory_probe.peak_bytes`): measured <= estimate <= 2 x measured.

The job pool refuses work whose estimate is over the operator's limit, so an estimate under
the truth lets a job take the server down, and one far above it refuses work that would fit.
Kinds measured elsewhere: generation (tests/generate/test_generation_memory.py), spans
(tests/capture/test_span_memory.py), the circuits page's first run and its weights job
(tests/circuits/test_circuits_memory.py). SmolLM2 (slow) at a long prompt checks both sides.
The bundled model's work is a few MiB, at the allocator's grain (its arrays are smaller than
the heap's own growth steps), so on it only the upper side is checked, with :data:`GRAIN`.
"""

from __future__ import annotations

import pytest

from tests.memory_probe import peak_bytes

MIB = 2**20
GRAIN = 8 * MIB

SETUP = """
from models.capture.rollout import rollout_cost, rollout_weights
from models.capture.run import capture
from models.circuits import CircuitTask, prepare
from models.circuits.atp import attribution_patching
from models.circuits.cost import atp_cost
from models.capture.compare import head_divergence
from models.capture.compare_cost import compare_cost
from models.model.loading import load
from models.model.spec import ModelSpec
from tests.generate.long_text import long_prompt

model = load(ModelSpec({name!r}))
text = long_prompt(model, {n})

def setup_of(text):
    return prepare(model, CircuitTask(
        text + " and then he went to the", text + " and then we went to the", " the", " a"
    ))

{warm}
"""

WORK = {
    "capture": (
        "run = capture(model, long_prompt(model, 8))",
        "run = capture(model, text)\n"
        "result = {'estimate': model.facts.capture_bytes(run.n_tokens), 'n': run.n_tokens}",
    ),
    "rollout": (
        "run = capture(model, text)\nrollout_weights(run, slice(0, 2), 'from')",
        "rollout_weights(run, slice(0, run.n_tokens), 'from')\n"
        "cost = rollout_cost(run.facts, run.n_tokens, factored=run.factored)\n"
        "result = {'estimate': cost.peak_bytes, 'n': run.n_tokens}",
    ),
    "compare": (
        "run = capture(model, text)\n"
        "other = capture(model, text.replace(' the ', ' a ', 40))\n"
        "small = capture(model, long_prompt(model, 8))\n"
        "head_divergence(small, small)",
        "head_divergence(run, other)\n"
        "cost = compare_cost(model.facts, run.n_tokens, other.n_tokens, run.factored)\n"
        "result = {'estimate': cost.peak_bytes, 'n': run.n_tokens}",
    ),
    "attribution patching": (
        "setup = setup_of(text)\nattribution_patching(model, setup_of(long_prompt(model, 8)))",
        "attribution_patching(model, setup)\n"
        "result = {'estimate': atp_cost(model, setup.n_tokens).peak_bytes, 'n': setup.n_tokens}",
    ),
}


def measure(name: str, kind: str, n: int) -> tuple[int, int]:
    warm, work = WORK[kind]
    peak, found = peak_bytes(SETUP.format(name=name, n=n, warm=warm), work)
    assert isinstance(found, dict) and abs(found["n"] - n) <= 8
    return peak, int(found["estimate"])


@pytest.mark.parametrize("n", [pytest.param(48, marks=pytest.mark.slow), 120])
@pytest.mark.parametrize("kind", ["capture", "rollout", "compare"])
def test_bundled_estimate_holds(kind, n):
    peak, estimate = measure("bundled", kind, n)
    print(f"{kind} at {n} tokens: measured {peak / MIB:.1f} MiB, estimate {estimate / MIB:.1f}")
    assert peak <= estimate + GRAIN, (peak / MIB, estimate / MIB)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "n"),
    [
        ("capture", 2000),  # streamed: q, k and LSE
        ("rollout", 1000),  # rebuilt layer by layer (rollout stops at about 1,250 tokens)
        ("attribution patching", 300),  # with the QK fix
        ("compare", 1500),  # streamed runs: the fused divergence
    ],
)
def test_smollm2_estimate_holds(kind, n):
    peak, estimate = measure("smollm2", kind, n)
    print(f"{kind} at {n} tokens: measured {peak / MIB:.1f} MiB, estimate {estimate / MIB:.1f}")
    assert peak <= estimate <= 2 * peak, (peak / MIB, estimate / MIB)
