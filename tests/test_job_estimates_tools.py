"""Each job's memory estimate against its peak, measured in a fresh process
(:func:`tests.memory_probe.peak_bytes`), for the kinds :mod:`tests.test_job_estimates` does not
hold: head importance, the pruned checkpoint, the bundled corpus, exact patching of every head
and of one head at every position, the scaling page's logits, its statistics sweep and its loss
sweep, the kernel check and the path loadings (:data:`WORK`). The work measured is the function
the page's section runs, with the arguments it passes, against the cost the section passes to
``run_job``.

SmolLM2 (slow) at a prompt length where the work is sizeable checks both sides, measured <=
estimate <= 2 x measured. The bundled model's work is a few MiB, at the allocator's grain, so
on it only the upper side is checked, with :data:`tests.memory_probe.GRAIN`. On the bundled
model only:

- the pruned checkpoint and the bundled corpus, whose memory does not grow with the prompt
  (two copies of the weights and the written files; a fixed list of texts);
- the statistics sweep: its arrays are a layer's at a time, and its peak is set by the
  allocator's heap rather than by them (SmolLM2, 300-token prompt read at 256 tokens, four runs
  in fresh processes: 379 and 444 MiB at 5 points, 523 and 54 at 21, against an estimate of
  1,080), so only its upper side holds.

The loss sweep on SmolLM2 is checked on its upper side only, for the same reason: the same
pass over 256 tokens peaked at 88.6-103.1 MiB alone and 160-168 MiB beside another test
process (an estimate of 189).
"""

from __future__ import annotations

import pytest

from tests.memory_probe import MODEL_SETUP, peak_and_estimate, under_estimate, within_estimate

SETUP = (
    MODEL_SETUP
    + """
short = long_prompt(model, 12)

{warm}
"""
)

PATCH_SETUP = (
    "from models.circuits.cost import exact_cost\n"
    "from models.cost import with_slack\n"
    "from models.circuits.patching import baseline, head_effects, position_effects\n"
    "setup = setup_of(text)\n"
    "base = baseline(model, setup)\n"
    "small = setup_of(short)\n"
)

SCALING = (
    "import numpy as np\n"
    "from models.scaling.capture import capture_scores, loss_at\n"
    "from models.scaling.maths import sweep\n"
    "from ui.sections.scaling import MAX_TOKENS, logits_cost, loss_cost, stats_cost\n"
    "factors = np.geomspace(0.1, 10.0, 5)\n"
)

WORK = {
    "importance": (
        "from models.heads.pruning.importance import importance_estimate, "
        "measure_corpus_importance\n"
        "from models.heads.pruning.loss import budget_tasks\n"
        "methods = ('gradient', 'zero')\n"
        "tasks = budget_tasks(model, [text], N)\n"
        "measure_corpus_importance(model, budget_tasks(model, [short], 16), methods)",
        "measure_corpus_importance(model, tasks, methods)\n"
        "n = int(tasks[0].ids.shape[1])\n"
        "result = {'estimate': importance_estimate(model, [n], methods).peak_bytes, 'n': n}",
    ),
    "prune": (
        "import tempfile\n"
        "from pathlib import Path\n"
        "from models.heads.pruning.export import export_estimate, prune_and_export\n"
        "from models.heads.pruning.loss import budget_tasks\n"
        "tasks = budget_tasks(model, [text], N)\n"
        "root = Path(tempfile.mkdtemp())\n"
        "prune_and_export(model.spec, [(0, 0)], root, budget_tasks(model, [short], 16), "
        "budget_bytes=None, name='warm')",
        "prune_and_export(model.spec, [(0, 0), (1, 1)], root, tasks, budget_bytes=None, "
        "name='pruned')\n"
        "n = int(tasks[0].ids.shape[1])\n"
        "result = {'estimate': export_estimate(model, tasks, 'float32')[0].peak_bytes, 'n': n}",
    ),
    "corpus": (
        "from models.heads.finding.corpus import corpus_cost, default_corpus\n",
        "default_corpus(model)\nresult = {'estimate': corpus_cost(model).peak_bytes, 'n': N}",
    ),
    "head patching": (
        PATCH_SETUP + "head_effects(model, small, baseline(model, small))",
        "head_effects(model, setup, base)\n"
        "cost = exact_cost(model, setup.n_tokens, model.facts.n_total_heads, base.batch)\n"
        "result = {'estimate': with_slack(cost.peak_bytes), 'n': setup.n_tokens}",
    ),
    "position patching": (
        PATCH_SETUP + "position_effects(model, small, baseline(model, small), 1, 0)",
        "position_effects(model, setup, base, 1, 0)\n"
        "cost = exact_cost(model, setup.n_tokens, setup.n_tokens, base.batch)\n"
        "result = {'estimate': with_slack(cost.peak_bytes), 'n': setup.n_tokens}",
    ),
    "logits": (
        SCALING + "capture_scores(model, short, MAX_TOKENS)",
        "found = capture_scores(model, text, MAX_TOKENS)\n"
        "result = {'estimate': logits_cost(model).peak_bytes, 'n': found.n_tokens}",
    ),
    "sweep": (
        SCALING + "found = capture_scores(model, text, MAX_TOKENS)\n"
        "sweep(capture_scores(model, short, MAX_TOKENS).scores, factors)",
        "sweep(found.scores, factors)\n"
        "cost = stats_cost(found.scores.size, len(factors))\n"
        "result = {'estimate': cost.peak_bytes, 'n': found.n_tokens}",
    ),
    "loss sweep": (
        SCALING + "loss_at(model, short, 0.5, MAX_TOKENS)\n"
        "n = capture_scores(model, text, MAX_TOKENS).n_tokens",
        "for c in factors:\n"
        "    loss_at(model, text, float(c), MAX_TOKENS)\n"
        "result = {'estimate': loss_cost(model, len(factors)).peak_bytes, 'n': n}",
    ),
    "kernel": (
        "from models.attention.check import check_kernel\n"
        "from ui.sections.kernel import MAX_TOKENS, kernel_cost\n"
        "check_kernel(model, short, max_tokens=MAX_TOKENS)",
        "check_kernel(model, text, max_tokens=MAX_TOKENS)\n"
        "result = {'estimate': kernel_cost(model).peak_bytes, 'n': min(N, MAX_TOKENS)}",
    ),
    "path loadings": (
        "from models.circuits.loadings import path_loadings, path_loadings_cost\n"
        "from models.circuits.paths import path_patching\n"
        "setup = setup_of(text)\n"
        "found = path_patching(model, setup, Head(1, 0), 'q')\n"
        "small = setup_of(short)\n"
        "path_loadings(model, small, path_patching(model, small, Head(1, 0), 'q'))",
        "path_loadings(model, setup, found)\n"
        "cost = path_loadings_cost(model, setup.n_tokens).cost\n"
        "result = {'estimate': cost.peak_bytes, 'n': setup.n_tokens}",
    ),
}


def measure(name: str, kind: str, n: int) -> tuple[int, int]:
    return peak_and_estimate(SETUP, WORK, kind, n, same_length=False, name=name)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind",
    [
        "importance",
        "corpus",
        "head patching",
        "position patching",
        "logits",
        "sweep",
        "loss sweep",
        "kernel",
        "path loadings",
        "prune",
    ],
)
def test_bundled_estimate_holds(kind):
    under_estimate(kind, 100, *measure("bundled", kind, 100))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "n"),
    [
        ("position patching", 64),  # copies a batch to fill the patching budget
        # every head patched, and every head ablated alone: 270 of each, so a short prompt
        # (about 2 and 1 minutes here)
        ("head patching", 16),
        ("importance", 16),
        ("logits", 300),  # the page reads the first 256 tokens
        ("kernel", 300),
        ("path loadings", 200),
    ],
)
def test_smollm2_estimate_holds(kind, n):
    within_estimate(kind, n, *measure("smollm2", kind, n))


@pytest.mark.slow
def test_smollm2_loss_sweep_estimate_is_above_its_peak():
    under_estimate("loss sweep", 300, *measure("smollm2", "loss sweep", 300))
