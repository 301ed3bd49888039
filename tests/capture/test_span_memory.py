"""A span's memory, measured in a fresh process against :func:`models.capture.spans.span_cost`.

The job pool refuses a span whose estimate is over the operator's limit, so the estimate must
hold: the measured peak under it, and the estimate at most twice the peak. Before spans were
read in blocks, a span over a 3,921-token prompt, over every head, held +1.86 GiB; while the
blocks sat just under the allocator's mmap threshold, the same span measured 47 to 94 MiB.
"""

from __future__ import annotations

import pytest

from tests.memory_probe import peak_bytes

SETUP = """
from models.capture.run import capture
from models.capture.spans import span_cost, span_weights
from models.model.loading import load
from models.model.spec import ModelSpec
from tests.generate.long_text import long_prompt

model = load(ModelSpec("smollm2"))
run = capture(model, long_prompt(model, {n}))
span_weights(run, {scope!r}, 3, 1, slice(0, 8), "from")
"""

WORK = """
span_weights(run, {scope!r}, 3, 1, slice(0, run.n_tokens), "from")
cost = span_cost(run.facts, run.n_tokens, run.n_tokens, {scope!r}, run.factored, False)
result = {{"estimate": cost.peak_bytes, "factored": run.factored}}
"""


@pytest.mark.slow
@pytest.mark.parametrize("scope", ["all", "head"])
def test_a_span_over_a_long_prompt_stays_within_its_estimate(scope):
    peak, found = peak_bytes(SETUP.format(n=1000, scope=scope), WORK.format(scope=scope))
    assert isinstance(found, dict) and found["factored"]  # long prompts keep q, k and LSE
    assert peak <= found["estimate"] <= 2 * peak, (peak, found["estimate"])
