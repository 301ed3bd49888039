"""The explorer's, head finder's and classroom's job estimates against their measured peaks,
in a fresh process (:func:`tests.memory_probe.peak_bytes`), as in tests/test_job_estimates.py:
measured <= estimate <= 2 x measured on SmolLM2 (slow); on the bundled model, whose work is a
few MiB at the allocator's grain, the upper side only, with :data:`tests.memory_probe.GRAIN`.

Each :data:`WORK` entry runs what the section's job runs, with the section's arguments, and
reports the cost the section passes to ``run_job``. Kinds: the value weighting
(``WeightingKey``), repeated-token scores (``RepeatedKey``), the classroom's layer read
(``LayerKey``, at most 512 tokens), the precision check (``PrecisionKey``) and compare mode's
difference overview (``DifferenceOverviewKey``). The precision check runs on the bundled model
only: it reads the first 128 rows whatever the prompt's length, so its work is the same at
every length past that (measured by hand on SmolLM2 in bfloat16 with :func:`measure`).
A GGUF conversion (``ConvertKey``) is priced by its file: the header's element count as
float32 times ``models.model.gguf.CONVERSION_OVERHEAD``, refused beforehand by
``check_conversion_fits``; converting SmolLM2 takes about a minute, too long for a test.
"""

from __future__ import annotations

import pytest

from tests.memory_probe import peak_and_estimate, under_estimate, within_estimate

SETUP = """
import torch
from models.capture.run import capture
from models.head import Head
from models.model.loading import load
from models.model.spec import ModelSpec
from tests.generate.long_text import long_prompt

model = load(ModelSpec({name!r}, dtype={dtype!r}))
N = {n}
text = long_prompt(model, N)

{warm}
"""

WORK = {
    "weighting": (
        "from models.capture.weighted import value_norms, value_weighting, weighting_cost\n"
        "def weigh(run):\n"
        "    norms = getattr(run.store, 'value_norms', None)\n"
        "    if norms is None:\n"
        "        norms = value_norms(model, torch.tensor([run.token_ids]))\n"
        "    return value_weighting(run, norms, 64)\n"
        "run = capture(model, text)\n"
        "weigh(capture(model, long_prompt(model, 8)))",
        "weigh(run)\nresult = {'estimate': weighting_cost(run).peak_bytes, 'n': run.n_tokens}",
    ),
    "repeated": (
        "from models.heads.finding.induction import measure_repeated, repeated_estimate\n"
        "span = max(2, N // 2 - 1)\n"
        "measure_repeated(model, 4, 2, 0)",
        "measure_repeated(model, span, 8, 0)\n"
        "result = {'estimate': repeated_estimate(model, span, 8).peak_bytes, 'n': 2 * span + 1}",
    ),
    "layer": (
        "from models.classroom.real import layer_activations, layer_cost\n"
        "layer_activations(model, text, 0, 8)",
        "layer_activations(model, text, 1, N)\n"
        "result = {'estimate': layer_cost(model.facts, N).peak_bytes, 'n': N}",
    ),
    "precision": (
        "from models.capture.precision import difference_cost, pattern_difference\n"
        "run = capture(model, text)\n"
        "pattern_difference(model, capture(model, long_prompt(model, 8)))",
        "pattern_difference(model, run)\n"
        "result = {'estimate': difference_cost(run).peak_bytes, 'n': run.n_tokens}",
    ),
    "difference overview": (
        "from models.capture.compare import align_runs\n"
        "from models.progress import quiet\n"
        "from ui.sections.explorer_compare_detail import Pair\n"
        "from ui.sections.explorer_difference import cost, pooled_difference\n"
        "def pair_of(a, b):\n"
        "    run_a, run_b = capture(model, a), capture(model, b)\n"
        "    return Pair(run_a, run_b, None, align_runs(run_a, run_b), None, None)\n"
        "pair = pair_of(text, text.replace(' the ', ' a ', 40))\n"
        "small = long_prompt(model, 8)\n"
        "pooled_difference(pair_of(small, small), Head(0, 0), 256, quiet)",
        "pooled_difference(pair, Head(1, 0), 256, quiet)\n"
        "result = {'estimate': cost(pair, 256).peak_bytes, 'n': pair.run_a.n_tokens}",
    ),
}


def measure(name: str, kind: str, n: int, dtype: str = "float32") -> tuple[int, int]:
    return peak_and_estimate(SETUP, WORK, kind, n, name=name, dtype=dtype)


@pytest.mark.parametrize(
    ("kind", "dtype"),
    [
        ("weighting", "float32"),
        ("repeated", "float32"),
        ("layer", "float32"),
        ("precision", "bfloat16"),  # measured on a low-precision run only
        ("difference overview", "float32"),
    ],
)
@pytest.mark.slow
def test_bundled_estimate_holds(kind, dtype):
    under_estimate(kind, 100, *measure("bundled", kind, 100, dtype))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "n"),
    [
        ("weighting", 2000),  # a band of every head's rows of one layer at a time
        ("repeated", 500),  # 8 sequences of 249 random tokens twice, in one chunk
        ("layer", 512),  # the classroom reads at most 512 tokens
        ("difference overview", 1000),  # a band of one head's rows of both prompts at a time
    ],
)
def test_smollm2_estimate_holds(kind, n):
    within_estimate(kind, n, *measure("smollm2", kind, n))
