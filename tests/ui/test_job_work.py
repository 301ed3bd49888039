"""What a cluster worker computes from a job key alone (:mod:`ui.runtime.job_work`) against the
core call the page makes for the same job, on the bundled model, and each result through the
compact form it travels in (:mod:`ui.runtime.result_codec`): encoded, decoded by the type its
key declares, and equal again. The cluster itself is tested in ``test_cluster.py``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from models.attention.check import check_kernel
from models.capture.compare import head_divergence
from models.capture.overview import OVERVIEW, THUMB
from models.capture.precision import pattern_difference
from models.capture.rollout import rollout_weights
from models.capture.run import capture
from models.capture.sinks import measured_sink
from models.capture.spans import span_weights
from models.capture.views import head_overview, strongest_sink
from models.capture.weighted import value_norms, value_weighting
from models.capture.word_split import split_words
from models.circuits import copying_task, prepare
from models.circuits.findings import attribution_findings, weight_findings
from models.circuits.loadings import dla_loadings, path_loadings
from models.circuits.patching import baseline, head_effects, position_effects
from models.circuits.paths import path_patching
from models.circuits.why import split
from models.circuits.why_effects import part_effects
from models.circuits.why_keep import keep
from models.classroom.real import layer_activations
from models.generate import generate
from models.generate.settings import GenerationSettings
from models.generate.sweep import EvictionSettings, eviction_sweep, plain_perplexity
from models.head import Head
from models.heads.atlas.compute import compute_atlas
from models.heads.finding.corpus import Corpus, default_corpus
from models.heads.finding.corpus_scores import score_corpus
from models.heads.finding.induction import measure_repeated
from models.heads.finding.prompt_scores import head_marks, prompt_scores
from models.heads.pruning.ablation import pruning_order
from models.heads.pruning.importance import measure_corpus_importance, pruning_curve
from models.heads.pruning.loss import budget_tasks
from models.heads.table import Thresholds
from models.model.forward import tokenize
from models.model.spec import ModelSpec
from models.progress import quiet
from models.scaling.capture import capture_scores, loss_at
from models.scaling.maths import sweep
from ui.runtime import job_work
from ui.runtime.job_keys import (
    AtlasKey,
    AttributionKey,
    CircuitKey,
    CompareKey,
    CorpusScoresKey,
    CurveKey,
    DlaLoadingsKey,
    EvictionKey,
    GenerationKey,
    HeadMarksKey,
    HeadPatchKey,
    ImportanceKey,
    KernelKey,
    LayerKey,
    LogitsKey,
    LossSweepKey,
    OverviewKey,
    PathKey,
    PathLoadingsKey,
    PositionPatchKey,
    PrecisionKey,
    RepeatedKey,
    RolloutKey,
    RunKey,
    SinkKey,
    SinkSummaryKey,
    SpanKey,
    SweepKey,
    WeightingKey,
    WeightsKey,
    WhyEffectsKey,
    WhyKey,
)
from ui.runtime.jobs import JobPool, Partial, RunHere
from ui.runtime.policy import admit
from ui.runtime.result_codec import decode_result, encode
from ui.runtime.settings import Settings
from viz.thumbnails import data_uri, pooled_png

PROMPT = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"
PROMPT_B = "def add(a, c):\n    return a + c\n\nprint(add(1, 2))\n"  # one name swapped
FACTORS = (0.5, 1.0, 2.0)
EVICTION = EvictionSettings(budgets=(8, 16), max_tokens=32)
WRITING = GenerationSettings(max_new_tokens=6, decoding="sample", seed=3)


@pytest.fixture(scope="module")
def keys(bundled):
    spec = admit(ModelSpec("bundled"), Settings())
    circuit = CircuitKey(spec, copying_task(bundled))
    path = PathKey(circuit, Head(2, 1), "q", "recomputed")
    logits = LogitsKey(spec, PROMPT, 64)
    corpus = default_corpus(bundled).head(3).key  # what a worker can rebuild from the model
    run = RunKey(spec, PROMPT, None)
    return {
        "run": run,
        "circuit": circuit,
        "head patching": HeadPatchKey(circuit),
        "position patching": PositionPatchKey(circuit, Head(2, 1)),
        "attribution": AttributionKey(circuit, True, True, 3, None),
        "path": path,
        "dla loadings": DlaLoadingsKey(circuit, Head(2, 1)),
        "path loadings": PathLoadingsKey(path),
        "weights": WeightsKey(spec),
        "repeated": RepeatedKey(spec, 20, 4, 0),
        "logits": logits,
        "sweep": SweepKey(logits, FACTORS),
        "loss sweep": LossSweepKey(logits, FACTORS),
        "kernel": KernelKey(spec, PROMPT, "float32", 64),
        "layer": LayerKey(spec, PROMPT, 1, 64),
        "eviction": EvictionKey(spec, PROMPT, EVICTION),
        "generation": GenerationKey(spec, PROMPT, WRITING),
        "corpus scores": CorpusScoresKey(spec, corpus, 48),
        "atlas": AtlasKey(spec, corpus, 48),
        "importance": (importance := ImportanceKey(spec, corpus, 64, 48, ("gradient", "zero"))),
        "curve": CurveKey(importance, "gradient", "zero"),
        "weighting": WeightingKey(run),
        "marks": HeadMarksKey(run),
        "sink": SinkKey(run, Head(2, 1)),
        "sink summary": SinkSummaryKey(run),
        "precision": PrecisionKey(run),
        "span": SpanKey(run, "all", Head(2, 1), (3, 9), "from", True, True),
        "rollout": RolloutKey(run, (3, 9), "to", True),
        "compare": CompareKey(run, RunKey(spec, PROMPT_B, None), True),
        "why": (why := WhyKey(run, Head(2, 1))),
        "why effects": WhyEffectsKey(why, 9, 4),
        "overview": OverviewKey(run, Head(2, 1), True),
    }


@pytest.fixture(scope="module")
def inputs(bundled, keys):
    """What the page's calls start from, computed once: the circuit task's setup and clean run,
    the corpus cut to its budget, and the prompt's capture."""
    setup = prepare(bundled, keys["circuit"].task)
    tasks = budget_tasks(bundled, default_corpus(bundled).head(3).texts, 64, 48)
    return setup, baseline(bundled, setup), tasks, capture(bundled, PROMPT)


def direct(model, name: str, inputs):
    """The page's own call for the job named ``name``."""
    setup, base, tasks, run = inputs
    found = {
        "run": lambda: capture(model, PROMPT),
        "circuit": lambda: base,
        "head patching": lambda: head_effects(model, setup, base),
        "position patching": lambda: position_effects(model, setup, base, 2, 1),
        "attribution": lambda: attribution_findings(
            model, setup, qk_fix=True, grad_drop=True, verify_top=3, edges=None, progress=quiet
        ),
        "path": lambda: path_patching(model, setup, Head(2, 1), "q", mlps="recomputed"),
        "dla loadings": lambda: dla_loadings(model, setup, Head(2, 1)),
        "path loadings": lambda: path_loadings(
            model, setup, path_patching(model, setup, Head(2, 1), "q", mlps="recomputed")
        ),
        "weights": lambda: weight_findings(model, quiet),
        "repeated": lambda: measure_repeated(model, 20, 4, 0),
        "logits": lambda: capture_scores(model, PROMPT, 64),
        "sweep": lambda: sweep(capture_scores(model, PROMPT, 64).scores, np.asarray(FACTORS)),
        "loss sweep": lambda: [loss_at(model, PROMPT, c, 64) for c in FACTORS],
        "kernel": lambda: check_kernel(model, PROMPT, max_tokens=64, dtype="float32"),
        "layer": lambda: layer_activations(model, PROMPT, 1, 64),
        "eviction": lambda: (
            eviction_sweep(model, PROMPT, EVICTION),
            plain_perplexity(model, tokenize(model, PROMPT, EVICTION.max_tokens)[0]),
        ),
        "generation": lambda: generate(model, PROMPT, WRITING),
        "corpus scores": lambda: score_corpus(model, default_corpus(model).head(3).texts, 48),
        "atlas": lambda: compute_atlas(model, default_corpus(model).head(3), 48),
        "importance": lambda: measure_corpus_importance(model, tasks, ("gradient", "zero")),
        "curve": lambda: pruning_curve(model, tasks, gradient_order(model, tasks), "zero"),
        "weighting": lambda: value_weighting(
            run, value_norms(model, torch.tensor([run.token_ids])), THUMB
        ),
        "marks": lambda: head_marks(prompt_scores(run), Thresholds()),
        "sink": lambda: strongest_sink(run, 2, 1),
        "sink summary": lambda: measured_sink(run),
        "precision": lambda: pattern_difference(model, run),
        "span": lambda: span_weights(
            run, "all", 2, 1, word_units(), "from", words(), weighting_of_run()
        ),
        "rollout": lambda: rollout_weights(run, word_units(), "to", words()),
        "compare": lambda: head_divergence(run, run_b, words(), words_of(run_b)),
        "why": lambda: kept(),
        "why effects": lambda: tuple(part_effects(model, kept(), split(kept(), 9, 4), 5)),
        "overview": lambda: data_uri(
            pooled_png(head_overview(run, 2, 1, OVERVIEW, weighting_of_run()), OVERVIEW, True)
        ),
    }
    run_b = capture(model, PROMPT_B)

    def words_of(other):
        return split_words(model.tokenizer, other.prompt, other.token_ids, other.tokens)

    def words():
        return split_words(model.tokenizer, run.prompt, run.token_ids, run.tokens)

    def word_units() -> slice:
        return words().covering(slice(3, 9))  # the span's tokens as the words over them

    def kept():
        return keep(model, torch.tensor([run.token_ids]), Head(2, 1))

    def weighting_of_run():
        return value_weighting(run, value_norms(model, torch.tensor([run.token_ids])), THUMB)

    return found[name]()


def gradient_order(model, tasks):
    """The heads from least to most important by the gradient ranking, as the page orders them."""
    return pruning_order(measure_corpus_importance(model, tasks, ("gradient",)).ranking("gradient"))


def resolver(model):
    def resolve(key):
        return job_work.compute(key, model, resolve, quiet)

    return resolve


def is_timing(name: str) -> bool:
    return "seconds" in name or "timing" in name or name.endswith(("_s", "_ms"))


def assert_same(a, b, where: str = "result") -> None:
    """Equal values (timings aside), arrays and floats to float32 rounding (the same calls on
    the same machine; a few kernels sum in a different order between two runs)."""
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    if isinstance(b, torch.Tensor):
        b = b.detach().cpu().numpy()
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, where
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=where)
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    elif dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for field in dataclasses.fields(a):
            if is_timing(field.name):
                continue  # how long it took: not part of the value
            assert_same(getattr(a, field.name), getattr(b, field.name), f"{where}.{field.name}")
    elif isinstance(a, dict):
        assert set(a) == set(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6), where
    else:
        assert a == b, where


KINDS = [
    "run",
    "circuit",
    "head patching",
    "position patching",
    "attribution",
    "path",
    "dla loadings",
    "path loadings",
    "weights",
    "repeated",
    "logits",
    "sweep",
    "loss sweep",
    "kernel",
    "layer",
    "eviction",
    "generation",
    "corpus scores",
    "atlas",
    "importance",
    "curve",
    "weighting",
    "marks",
    "sink",
    "sink summary",
    "precision",
    "span",
    "rollout",
    "compare",
    "why",
    "why effects",
    "overview",
]


def test_every_kind_listed_here_is_registered_and_nothing_else():
    assert {type(k).__name__ for k in [*job_work._WORK]} >= set()  # the registry is a dict
    registered = {
        kind.__name__ for kind in job_work._WORK if kind.__module__ != "tests.ui.cluster_work"
    }
    listed = {
        "RunKey", "CircuitKey", "HeadPatchKey", "PositionPatchKey", "AttributionKey", "PathKey",
        "DlaLoadingsKey", "PathLoadingsKey", "WeightsKey", "RepeatedKey", "LogitsKey", "SweepKey",
        "LossSweepKey", "KernelKey", "LayerKey", "EvictionKey",
        "GenerationKey", "CorpusScoresKey", "AtlasKey",
        "ImportanceKey", "CurveKey", "WeightingKey", "HeadMarksKey", "SinkKey", "SinkSummaryKey",
        "PrecisionKey", "SpanKey", "RolloutKey", "CompareKey", "WhyKey", "WhyEffectsKey",
        "OverviewKey",
    }  # fmt: skip
    assert registered == listed


@pytest.mark.parametrize("name", KINDS)
def test_a_worker_computes_what_the_page_computes(bundled, keys, inputs, name):
    key = keys[name]
    assert job_work.runs(key)
    assert job_work.spec_of(key) == keys["run"].spec
    from_key = job_work.compute(key, bundled, resolver(bundled), quiet)
    assert_same(from_key, direct(bundled, name, inputs))
    tree, arrays = encode(from_key)
    assert_same(decode_result(key, tree, arrays), from_key)


def test_streaming_work_writes_its_text_so_far_where_it_is_told(bundled, keys):
    key, seen = keys["generation"], []
    partial = Partial()
    partial.update = seen.append  # every text the work hands on, in order
    found = job_work.compute(key, bundled, resolver(bundled), quiet, partial)
    assert len(seen) == len(found.steps)
    written = [step.choice.token_id for step in found.steps]
    assert seen[-1] == bundled.tokenizer.decode(written, skip_special_tokens=False)
    assert seen[0] == bundled.tokenizer.decode(written[:1], skip_special_tokens=False)


class RefusingCluster:
    """A cluster whose worker cannot rebuild the job's inputs."""

    notice = None

    def runs(self, key) -> bool:
        return True

    def lookup(self, key):
        return None

    def run(self, key, report, partial=None):
        raise RunHere("the corpus is not the model's bundled one")


def test_a_corpus_only_the_front_end_holds_is_computed_there(bundled, keys):
    upload = Corpus("notes.txt", ("one two three one two three", "four five"), "an upload")
    key = CorpusScoresKey(keys["run"].spec, upload.key, 48)
    with pytest.raises(RunHere):
        job_work.compute(key, bundled, resolver(bundled), quiet)
    pool = JobPool(Settings())
    pool.cluster = RefusingCluster()
    job = pool.submit(key, "scores", lambda p: score_corpus(bundled, upload.texts, 48, p))
    assert_same(job.future.result(timeout=120), score_corpus(bundled, upload.texts, 48))
    assert pool.cluster.notice is None  # nothing is wrong with the cluster
