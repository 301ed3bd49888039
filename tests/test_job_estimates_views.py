"""The estimates of the explorer's views of a held run against their measured peaks, in a fresh
process (:func:`tests.memory_probe.peak_bytes`), as in tests/test_job_estimates.py: measured <=
estimate <= 2 x measured on SmolLM2 (slow); on the bundled model, whose work is a few MiB at the
allocator's grain, the upper side only, with :data:`tests.memory_probe.GRAIN`.

Each :data:`WORK` entry runs what ``ui.sections.explorer_results`` (or the page's sink line)
hands to ``run_job`` and reports the cost it passes: the grid's marks (``HeadMarksKey``), the
run's sink line (``SinkSummaryKey``), one head's overview (``OverviewKey``, unweighted) and its
strongest sink (``SinkKey``). Their work grows with the prompt (a weight a position of every
head; a band of rows against every key of one head), so they run as jobs like any other.
"""

from __future__ import annotations

import pytest

from tests.memory_probe import peak_and_estimate, under_estimate, within_estimate

SETUP = """
from models.capture.run import capture
from models.model.loading import load
from models.model.spec import ModelSpec
from tests.generate.long_text import long_prompt

model = load(ModelSpec({name!r}))
run = capture(model, long_prompt(model, {n}))
small = capture(model, long_prompt(model, 8))
{warm}
"""

WORK = {
    "head marks": (
        "from models.heads.finding.prompt_scores import head_marks, prompt_scores, scores_cost\n"
        "from models.heads.table import Thresholds\n"
        "head_marks(prompt_scores(small), Thresholds())",
        "head_marks(prompt_scores(run), Thresholds())\n"
        "result = {'estimate': scores_cost(run).peak_bytes, 'n': run.n_tokens}",
    ),
    "sink summary": (
        "from models.capture.sinks import measured_sink, sink_cost\nmeasured_sink(small)",
        "measured_sink(run)\nresult = {'estimate': sink_cost(run).peak_bytes, 'n': run.n_tokens}",
    ),
    "overview": (
        "from models.capture.views import head_overview\n"
        "from models.head import Head\n"
        "from ui.sections.explorer_results import OVERVIEW, overview_picture_cost\n"
        "from viz.thumbnails import data_uri, pooled_png\n"
        "def draw(run, head):\n"
        "    pooled = head_overview(run, head.layer, head.index, OVERVIEW)\n"
        "    return data_uri(pooled_png(pooled, OVERVIEW, normalise=True))\n"
        "head = Head(run.facts.n_layers // 2, run.facts.n_heads - 1)\n"
        "draw(small, head)",
        "draw(run, head)\n"
        "result = {'estimate': overview_picture_cost(run, head, False).peak_bytes, "
        "'n': run.n_tokens}",
    ),
    "strongest sink": (
        "from models.capture.views import strongest_sink, strongest_sink_cost\n"
        "strongest_sink(small, 0, 0)",
        "strongest_sink(run, run.facts.n_layers // 2, 0)\n"
        "result = {'estimate': strongest_sink_cost(run).peak_bytes, 'n': run.n_tokens}",
    ),
}


def measure(name: str, kind: str, n: int) -> tuple[int, int]:
    return peak_and_estimate(SETUP, WORK, kind, n, name=name)


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(WORK))
def test_bundled_estimate_holds(kind):
    under_estimate(kind, 100, *measure("bundled", kind, 100))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "n"),
    [
        ("head marks", 2000),
        ("sink summary", 4000),  # 16 rows of every head: a few MiB, the grain's share large below
        ("overview", 4000),
        ("strongest sink", 2000),
    ],
)
def test_smollm2_estimate_holds(kind, n):
    within_estimate(kind, n, *measure("smollm2", kind, n))
