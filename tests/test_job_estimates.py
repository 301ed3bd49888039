"""Each job's memory estimate against its peak, measured in a fresh process
(:func:`tests.memory_probe.peak_bytes`): measured <= estimate <= 2 x measured.

The job pool refuses work whose estimate is over the operator's limit, so an estimate under
the truth lets a job take the server down, and one far above it refuses work that would fit.
Kinds here: capture, rollout, compare, attribution patching, path patching, the circuit graph
(AtP with every edge), Why here's kept parts and its part effects, the KV eviction sweep, corpus
scores, the head atlas, the pruning curve and DLA loadings (:data:`WORK`; the SmolLM2 tests
check the kinds whose memory grows fastest with the prompt, the rest run on the bundled model
here and were measured on SmolLM2 by hand with :func:`measure`). Kinds measured elsewhere:
generation (tests/generate/test_generation_memory.py), spans
(tests/capture/test_span_memory.py), the circuits page's first run and its weights job
(tests/circuits/test_circuits_memory.py).
SmolLM2 (slow) at a long prompt checks both sides. The bundled model's work is a few MiB, at
the allocator's grain (its arrays are smaller than the heap's own growth steps), so on it only
the upper side is checked, with :data:`tests.memory_probe.GRAIN`.
"""

from __future__ import annotations

import pytest

from tests.memory_probe import MODEL_SETUP, peak_and_estimate, under_estimate, within_estimate

SETUP = (
    MODEL_SETUP
    + """
from models.capture.rollout import rollout_cost, rollout_weights
from models.capture.run import capture
from models.circuits.atp import attribution_patching
from models.circuits.cost import atp_cost, path_cost, edges_cost
from models.circuits.paths import path_patching
from models.circuits.findings import attribution_findings
from models.circuits.why import split
from models.circuits.why_effects import part_effects, part_effects_cost
from models.circuits.why_keep import keep, keep_cost
from models.model.forward import tokenize
from models.capture.compare import head_divergence
from models.capture.compare_cost import compare_cost

{warm}
"""
)

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
    "path patching": (
        "setup = setup_of(text)\n"
        "path_patching(model, setup_of(long_prompt(model, 8)), Head(1, 0), 'q')",
        "receiver = Head(2, 0)\n"
        "path_patching(model, setup, receiver, 'q')\n"
        "cost = path_cost(model, setup.n_tokens, receiver.layer)\n"
        "result = {'estimate': cost.peak_bytes, 'n': setup.n_tokens}",
    ),
    "edges": (
        "setup = setup_of(text)\n"
        "attribution_findings(model, setup_of(long_prompt(model, 8)), qk_fix=True, "
        "grad_drop=False, verify_top=0, edges='recomputed', progress=lambda *a: None)",
        "attribution_findings(model, setup, qk_fix=True, grad_drop=False, verify_top=0, "
        "edges='recomputed', progress=lambda *a: None)\n"
        "cost = atp_cost(model, setup.n_tokens).then(edges_cost(model, setup.n_tokens))\n"
        "result = {'estimate': cost.peak_bytes, 'n': setup.n_tokens}",
    ),
    "why keep": (
        "ids = tokenize(model, text)[0]\n"
        "head = Head(model.facts.n_layers - 1, 0)\n"
        "keep(model, ids[:, :8], head)",
        "keep(model, ids, head)\n"
        "cost = keep_cost(model, ids.shape[1], head.layer)\n"
        "result = {'estimate': cost.peak_bytes, 'n': ids.shape[1]}",
    ),
    "why effects": (
        "ids = tokenize(model, text)[0]\n"
        "kept = keep(model, ids, Head(model.facts.n_layers - 1, 0))\n"
        "cell = split(kept, ids.shape[1] - 1, 1)\n"
        "part_effects(model, kept, split(kept, 4, 1), 5)",
        "part_effects(model, kept, cell, 5)\n"
        "result = {'estimate': part_effects_cost(model, kept, 5).peak_bytes, 'n': kept.n_pos}",
    ),
    "eviction": (
        "from models.generate.sweep import EvictionSettings, eviction_sweep, estimate\n"
        "from models.generate.sweep import plain_perplexity\n"
        "settings = EvictionSettings(budgets=(64, 128), max_tokens=N)\n"
        "ids = tokenize(model, text, N)[0]\n"
        "short = EvictionSettings(budgets=(8,), max_tokens=32)\n"
        "eviction_sweep(model, text, short)\n"
        "plain_perplexity(model, ids[:, :16])",
        "eviction_sweep(model, text, settings)\n"
        "plain_perplexity(model, ids)\n"
        "result = {'estimate': estimate(model, ids.shape[1], settings).peak_bytes, "
        "'n': ids.shape[1]}",
    ),
    "corpus scores": (
        "from models.heads.finding.corpus_scores import score_corpus, score_estimate\n"
        "score_corpus(model, [long_prompt(model, 8)])",
        "score_corpus(model, [text])\n"
        "n = tokenize(model, text)[0].shape[1]\n"
        "result = {'estimate': score_estimate(model, [n]).peak_bytes, 'n': n}",
    ),
    "atlas": (
        "from models.heads.atlas.compute import atlas_estimate, compute_atlas\n"
        "from models.heads.finding.corpus import Corpus\n"
        "compute_atlas(model, Corpus('short', (long_prompt(model, 8),), 'test'))",
        "compute_atlas(model, Corpus('long', (text,), 'test'))\n"
        "n = tokenize(model, text)[0].shape[1]\n"
        "result = {'estimate': atlas_estimate(model, [n]).peak_bytes, 'n': n}",
    ),
    "prune curve": (
        "from models.head import all_heads\n"
        "from models.heads.pruning.importance import curve_estimate, curve_points, "
        "pruning_curve\n"
        "from models.heads.pruning.loss import corpus_tasks\n"
        "order = list(all_heads(model.facts.n_layers, model.facts.n_heads))\n"
        "tasks = corpus_tasks(model, [text])\n"
        "pruning_curve(model, corpus_tasks(model, [long_prompt(model, 8)]), order)",
        "pruning_curve(model, tasks, order)\n"
        "n = tasks[0].ids.shape[1]\n"
        "cost = curve_estimate(model, [n], len(curve_points(len(order))))\n"
        "result = {'estimate': cost.peak_bytes, 'n': n}",
    ),
    "dla loadings": (
        "from models.circuits.loadings import dla_loadings, dla_loadings_cost\n"
        "setup = setup_of(text)\n"
        "receiver = Head(model.facts.n_layers - 1, 0)\n"
        "dla_loadings(model, setup_of(long_prompt(model, 8)), receiver)",
        "dla_loadings(model, setup, receiver)\n"
        "cost = dla_loadings_cost(model, setup.n_tokens, receiver)\n"
        "result = {'estimate': cost.peak_bytes, 'n': setup.n_tokens}",
    ),
}


def measure(name: str, kind: str, n: int) -> tuple[int, int]:
    return peak_and_estimate(SETUP, WORK, kind, n, name=name)


@pytest.mark.parametrize("n", [pytest.param(48, marks=pytest.mark.slow), 120])
@pytest.mark.parametrize("kind", ["capture", "rollout", "compare"])
def test_bundled_estimate_holds(kind, n):
    under_estimate(kind, n, *measure("bundled", kind, n))


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["edges", "why effects", "corpus scores", "atlas", "prune curve", "dla loadings"]
)
def test_bundled_estimate_holds_for_the_other_kinds(kind):
    """Each kind not measured on SmolLM2 below, on the bundled model's 100 tokens (upper side:
    the circuit graph on SmolLM2 takes longer than a test may, over 15 minutes at 200 tokens
    on 2 cores; the others were measured there by hand, see the README's table)."""
    under_estimate(kind, 100, *measure("bundled", kind, 100))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "n"),
    [
        ("capture", 2000),  # streamed: q, k and LSE
        ("rollout", 1000),  # rebuilt layer by layer (rollout stops at about 1,250 tokens)
        ("attribution patching", 300),  # with the QK fix
        ("compare", 1500),  # streamed runs: the fused divergence
        ("why keep", 1000),  # the parts a block of positions at a time
        ("path patching", 600),  # one patched copy a pass, its logits held three times
        ("eviction", 1000),  # the plain pass's whole logits set the peak
        ("edges", 16),  # the circuit graph: a chunk of 32 senders a pass, to the logits
    ],
)
def test_smollm2_estimate_holds(kind, n):
    within_estimate(kind, n, *measure("smollm2", kind, n))
