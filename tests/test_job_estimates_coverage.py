"""Every kind of job (:mod:`ui.runtime.job_keys`) has its memory estimate measured by a test,
or is a small derived view the page computes itself.

A new key type fails here until a test measures its estimate (an entry of one of the ``WORK``
tables, or a test function), or until it is listed as a derived view and shown never to be
submitted to the job pool.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

from ui.runtime import job_keys
from ui.runtime.store import JobKey

ROOT = Path(__file__).resolve().parents[1]

# kind -> (test module, the WORK entry or test function that measures its estimate)
MEASURED = {
    "RunKey": ("tests.test_job_estimates", "capture"),
    "RolloutKey": ("tests.test_job_estimates", "rollout"),
    "CompareKey": ("tests.test_job_estimates", "compare"),
    "AttributionKey": ("tests.test_job_estimates", "attribution patching"),
    "PathKey": ("tests.test_job_estimates", "path patching"),
    "WhyKey": ("tests.test_job_estimates", "why keep"),
    "WhyEffectsKey": ("tests.test_job_estimates", "why effects"),
    "EvictionKey": ("tests.test_job_estimates", "eviction"),
    "CorpusScoresKey": ("tests.test_job_estimates", "corpus scores"),
    "AtlasKey": ("tests.test_job_estimates", "atlas"),
    "CurveKey": ("tests.test_job_estimates", "prune curve"),
    "DlaLoadingsKey": ("tests.test_job_estimates", "dla loadings"),
    "WeightingKey": ("tests.test_job_estimates_explorer", "weighting"),
    "RepeatedKey": ("tests.test_job_estimates_explorer", "repeated"),
    "LayerKey": ("tests.test_job_estimates_explorer", "layer"),
    "PrecisionKey": ("tests.test_job_estimates_explorer", "precision"),
    "DifferenceOverviewKey": ("tests.test_job_estimates_explorer", "difference overview"),
    "ImportanceKey": ("tests.test_job_estimates_tools", "importance"),
    "PruneKey": ("tests.test_job_estimates_tools", "prune"),
    "CorpusKey": ("tests.test_job_estimates_tools", "corpus"),
    "HeadPatchKey": ("tests.test_job_estimates_tools", "head patching"),
    "PositionPatchKey": ("tests.test_job_estimates_tools", "position patching"),
    "LogitsKey": ("tests.test_job_estimates_tools", "logits"),
    "SweepKey": ("tests.test_job_estimates_tools", "sweep"),
    "LossSweepKey": ("tests.test_job_estimates_tools", "loss sweep"),
    "KernelKey": ("tests.test_job_estimates_tools", "kernel"),
    "PathLoadingsKey": ("tests.test_job_estimates_tools", "path loadings"),
    "SpanKey": (
        "tests.capture.test_span_memory",
        "test_a_span_over_a_long_prompt_stays_within_its_estimate",
    ),
    "GenerationKey": (
        "tests.generate.test_generation_memory",
        "test_smollm2_generation_stays_within_its_estimate_and_flat",
    ),
    "CircuitKey": (
        "tests.circuits.test_circuits_memory",
        "test_smollm2_clean_and_corrupted_runs_stay_within_their_estimate",
    ),
    "WeightsKey": (
        "tests.circuits.test_circuits_memory",
        "test_smollm2_weights_job_stays_within_its_estimate",
    ),
    "HeadMarksKey": ("tests.test_job_estimates_views", "head marks"),
    "SinkSummaryKey": ("tests.test_job_estimates_views", "sink summary"),
    "OverviewKey": ("tests.test_job_estimates_views", "overview"),
    "SinkKey": ("tests.test_job_estimates_views", "strongest sink"),
    "ConvertKey": (
        "tests.model.test_gguf_memory",
        "test_a_gguf_conversion_stays_within_its_estimate",
    ),
}

# derived views: computed by the page from a finished result (``derived.get_or_compute``), their
# work bounded by something other than the prompt's length (the model, a streaming capture's
# pooled pictures, a dense run's size limit, a fixed sample) or one tokenizer pass over it
DERIVED = {
    "ThumbnailsKey": "a streaming capture's pooled pictures, or a dense run's own patterns",
    "WordsKey": "the tokenizer's text of each token",
    "PresetsKey": "the model's fixed list of tasks",
    "SyntheticKey": "a fixed number of random vectors",
}


def kinds() -> set[str]:
    return {
        name
        for name, cls in inspect.getmembers(job_keys, inspect.isclass)
        if issubclass(cls, JobKey) and cls is not JobKey and cls.__module__ == job_keys.__name__
    }


def constructions(names: set[str]) -> list[tuple[str, str, ast.AST | None]]:
    """Each call in ui/ (outside the keys' own module) that builds a key named in ``names``:
    its file, the class and the call it is an argument of (None if it is not one)."""
    found = []
    for path in (ROOT / "ui").rglob("*.py"):
        if path.name == "job_keys.py":
            continue
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            name = node.func if isinstance(node, ast.Call) else None
            if isinstance(name, ast.Name) and name.id in names:
                found.append((path.name, name.id, parents.get(node)))
    return found


def test_every_kind_of_job_is_measured_or_derived():
    assert set(MEASURED) | set(DERIVED) == kinds()
    assert not set(MEASURED) & set(DERIVED)


def test_each_measurement_named_exists():
    for kind, (module_name, entry) in MEASURED.items():
        module = importlib.import_module(module_name)
        work = getattr(module, "WORK", {})
        assert entry in work or callable(getattr(module, entry, None)), (kind, module_name, entry)


def test_derived_views_are_only_computed_by_the_page_from_results():
    """Each derived key is built only as the first argument of ``derived.get_or_compute``,
    never handed to the job pool (which would price it with no estimate tested here)."""
    built = constructions(set(DERIVED))
    assert {kind for _, kind, _ in built} == set(DERIVED)  # the reader sees every one
    for file, kind, parent in built:
        assert (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Attribute)
            and parent.func.attr == "get_or_compute"
            and isinstance(parent.func.value, ast.Attribute)
            and parent.func.value.attr == "derived"
        ), (file, kind)
