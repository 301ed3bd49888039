"""The work a job key stands for, computed from the key's fields alone (what a cluster worker
runs).

A page hands the pool its work as a closure over the loaded model; a Ray worker
(:mod:`ui.runtime.cluster`) has only the key, so each kind it can run is registered here with
how to find its model (:func:`spec_of`) and how to compute its result from the model and the
key's validated fields (:func:`compute`): the same calls the pages make. Work that streams
what it has so far (generation's text) writes it to the :class:`ui.runtime.jobs.Partial` it is
given, here or on a worker, which hands it on to the front end. A key kind not registered here
always runs in the front end's own pool. No Streamlit, no Ray here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar, overload

import numpy as np
import torch

from models.attention.check import KernelReport, check_kernel
from models.capture.compare import Comparison, head_divergence
from models.capture.overview import OVERVIEW, THUMB
from models.capture.precision import PatternDifference, pattern_difference
from models.capture.rollout import rollout_weights
from models.capture.run import AttentionRun, capture
from models.capture.sinks import SinkSummary, measured_sink
from models.capture.spans import span_weights
from models.capture.views import head_overview, pooled_signed, strongest_sink
from models.capture.weighted import (
    ValueWeighting,
    gated_norms,
    layer_values,
    value_norms,
    value_weighting,
)
from models.capture.word_split import split_words
from models.capture.words import Words, unit_range
from models.circuits.findings import (
    AtPFindings,
    WeightFindings,
    attribution_findings,
    weight_findings,
)
from models.circuits.loadings import Loadings, dla_loadings, path_loadings
from models.circuits.patching import Baseline, baseline, head_effects, position_effects
from models.circuits.paths import PathResult, path_patching
from models.circuits.task import prepare
from models.circuits.why import split
from models.circuits.why_effects import PartEffect, part_effects
from models.circuits.why_keep import KeptHead, keep
from models.classroom.real import LayerActivations, layer_activations
from models.generate import Generation, Step, generate
from models.generate.settings import GenerationSettings
from models.generate.sweep import EvictionResult, eviction_against_plain
from models.head import Head
from models.heads.atlas.compute import Atlas, compute_atlas
from models.heads.finding.corpus import Corpus, bundled_corpus_with_key
from models.heads.finding.corpus_scores import CorpusScores, score_corpus
from models.heads.finding.induction import RepeatedScores, measure_repeated
from models.heads.finding.prompt_scores import head_marks, prompt_scores
from models.heads.names import AblationMethod, Ranking
from models.heads.pruning.ablation import pruning_order
from models.heads.pruning.importance import (
    CorpusImportance,
    corpus_means,
    measure_corpus_importance,
    pruning_curve,
)
from models.heads.pruning.loss import LossTask, budget_tasks
from models.heads.table import Thresholds
from models.model.handle import ModelHandle
from models.progress import Progress
from models.scaling.capture import FactorLoss, ScoreCapture, capture_scores, loss_curve
from models.scaling.maths import SweepStats, sweep
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
from ui.runtime.jobs import Partial, RunHere
from ui.runtime.policy import AllowedSpec
from ui.runtime.store import JobKey
from viz.thumbnails import data_uri, pooled_png, signed_pngs

R = TypeVar("R")


class Resolve(Protocol):
    """The result of another key the work builds on, of the type that key declares."""

    def __call__(self, key: JobKey[R], /) -> R: ...


Compute = Callable[[ModelHandle, Any, Resolve, Progress, Partial], object]

_WORK: dict[type, tuple[Callable[[Any], AllowedSpec], Compute]] = {}


def register(kind: type, spec: Callable[[Any], AllowedSpec]) -> Callable[[Compute], Compute]:
    """Register ``compute`` as the work of key class ``kind``, whose model is ``spec(key)``."""

    def add(compute: Compute) -> Compute:
        _WORK[kind] = (spec, compute)
        return compute

    return add


def runs(key: object) -> bool:
    """Whether ``key``'s kind can be computed from the key alone (so on a cluster worker)."""
    return type(key) in _WORK


def spec_of(key: JobKey[Any]) -> AllowedSpec:
    """The model ``key``'s work runs on.

    Raises:
        KeyError: a kind not registered here.
    """
    return _WORK[type(key)][0](key)


@overload
def compute(
    key: JobKey[R],
    model: ModelHandle,
    resolve: Resolve,
    progress: Progress,
    partial: Partial | None = None,
) -> R: ...


@overload
def compute(
    key: Hashable,
    model: ModelHandle,
    resolve: Resolve,
    progress: Progress,
    partial: Partial | None = None,
) -> object: ...


def compute(
    key: Hashable,
    model: ModelHandle,
    resolve: Resolve,
    progress: Progress,
    partial: Partial | None = None,
) -> object:
    """``key``'s result, computed on ``model`` (``resolve`` gives the keys it builds on): the
    work registered for ``key``'s class, which returns what that class declares; streaming
    work writes what it has so far to ``partial``.

    Raises:
        KeyError: a kind not registered here.
    """
    return _WORK[type(key)][1](model, key, resolve, progress, partial or Partial())


@register(RunKey, lambda key: key.spec)
def _capture(
    model: ModelHandle, key: RunKey, _resolve: Resolve, progress: Progress, _partial: Partial
) -> AttentionRun:
    return capture(model, key.prompt, max_tokens=key.max_tokens, progress=progress)


@register(CircuitKey, lambda key: key.spec)
def _baseline(
    model: ModelHandle, key: CircuitKey, _resolve: Resolve, progress: Progress, _partial: Partial
) -> Baseline:
    return baseline(model, prepare(model, key.task), progress=progress)


@register(HeadPatchKey, lambda key: key.circuit.spec)
def _head_patch(
    model: ModelHandle, key: HeadPatchKey, resolve: Resolve, progress: Progress, _partial: Partial
) -> np.ndarray:
    setup = prepare(model, key.circuit.task)
    return head_effects(model, setup, resolve(key.circuit), progress=progress)


@register(PositionPatchKey, lambda key: key.circuit.spec)
def _position_patch(
    model: ModelHandle,
    key: PositionPatchKey,
    resolve: Resolve,
    progress: Progress,
    _partial: Partial,
) -> np.ndarray:
    setup, head = prepare(model, key.circuit.task), key.head
    base = resolve(key.circuit)
    return position_effects(model, setup, base, head.layer, head.index, progress=progress)


@register(AttributionKey, lambda key: key.circuit.spec)
def _attribution(
    model: ModelHandle,
    key: AttributionKey,
    _resolve: Resolve,
    progress: Progress,
    _partial: Partial,
) -> AtPFindings:
    return attribution_findings(
        model,
        prepare(model, key.circuit.task),
        qk_fix=key.qk_fix,
        grad_drop=key.grad_drop,
        verify_top=key.verify_top,
        edges=key.edges,
        progress=progress,
    )


@register(PathKey, lambda key: key.circuit.spec)
def _path(
    model: ModelHandle, key: PathKey, _resolve: Resolve, progress: Progress, _partial: Partial
) -> PathResult:
    setup = prepare(model, key.circuit.task)
    return path_patching(model, setup, key.receiver, key.input, mlps=key.mlps, progress=progress)


@register(DlaLoadingsKey, lambda key: key.circuit.spec)
def _dla_loadings(
    model: ModelHandle,
    key: DlaLoadingsKey,
    _resolve: Resolve,
    progress: Progress,
    _partial: Partial,
) -> Loadings:
    return dla_loadings(model, prepare(model, key.circuit.task), key.head, progress)


@register(PathLoadingsKey, lambda key: key.path.circuit.spec)
def _path_loadings(
    model: ModelHandle,
    key: PathLoadingsKey,
    resolve: Resolve,
    _progress: Progress,
    _partial: Partial,
) -> Loadings:
    return path_loadings(model, prepare(model, key.path.circuit.task), resolve(key.path))


@register(WeightsKey, lambda key: key.spec)
def _weights(
    model: ModelHandle, _key: WeightsKey, _resolve: Resolve, progress: Progress, _partial: Partial
) -> WeightFindings:
    return weight_findings(model, progress)


@register(RepeatedKey, lambda key: key.spec)
def _repeated(
    model: ModelHandle, key: RepeatedKey, _resolve: Resolve, progress: Progress, _partial: Partial
) -> RepeatedScores:
    return measure_repeated(model, key.seq_len, key.batch, key.seed, progress=progress)


@register(LogitsKey, lambda key: key.spec)
def _logits(
    model: ModelHandle, key: LogitsKey, _resolve: Resolve, _progress: Progress, _partial: Partial
) -> ScoreCapture:
    return capture_scores(model, key.prompt, key.max_tokens)


@register(SweepKey, lambda key: key.logits.spec)
def _sweep(
    model: ModelHandle, key: SweepKey, resolve: Resolve, _progress: Progress, _partial: Partial
) -> SweepStats:
    found = resolve(key.logits)
    return sweep(found.scores, np.asarray(key.factors), found.softcaps)


@register(LossSweepKey, lambda key: key.logits.spec)
def _loss_sweep(
    model: ModelHandle, key: LossSweepKey, _resolve: Resolve, progress: Progress, _partial: Partial
) -> list[FactorLoss]:
    return loss_curve(model, key.logits.prompt, key.factors, key.logits.max_tokens, progress)


@register(KernelKey, lambda key: key.spec)
def _kernel(
    model: ModelHandle, key: KernelKey, _resolve: Resolve, _progress: Progress, _partial: Partial
) -> KernelReport:
    return check_kernel(model, key.prompt, max_tokens=key.max_tokens, dtype=key.dtype)


@register(LayerKey, lambda key: key.spec)
def _layer(
    model: ModelHandle, key: LayerKey, _resolve: Resolve, _progress: Progress, _partial: Partial
) -> LayerActivations:
    return layer_activations(model, key.prompt, key.layer, key.max_tokens)


@register(EvictionKey, lambda key: key.spec)
def _eviction(
    model: ModelHandle, key: EvictionKey, _resolve: Resolve, progress: Progress, _partial: Partial
) -> tuple[EvictionResult, float]:
    return eviction_against_plain(model, key.text, key.settings, progress)


def streamed_generation(
    model: ModelHandle,
    prompt: str,
    settings: GenerationSettings,
    progress: Progress,
    partial: Partial,
) -> Generation:
    """:func:`models.generate.generate`, with the text written so far in ``partial`` after
    every step (the page shows it while the model writes)."""
    written: list[int] = []

    def on_step(step: Step) -> None:
        written.append(step.choice.token_id)
        partial.update(model.tokenizer.decode(written, skip_special_tokens=False))

    return generate(model, prompt, settings, on_step=on_step, progress=progress)


@register(GenerationKey, lambda key: key.spec)
def _generation(
    model: ModelHandle, key: GenerationKey, _resolve: Resolve, progress: Progress, partial: Partial
) -> Generation:
    return streamed_generation(model, key.prompt, key.settings, progress, partial)


def corpus_of(model: ModelHandle, key: str) -> Corpus:
    """The corpus whose content key is ``key``, when the model's bundled corpus (or its first
    passages) is that corpus.

    Raises:
        RunHere: any other corpus (an upload, the sidebar's prompt): only the front end that
            read it holds its texts.
    """
    found = bundled_corpus_with_key(model, key)
    if found is None:
        raise RunHere("the corpus is not the model's bundled one")
    return found


@register(CorpusScoresKey, lambda key: key.spec)
def _corpus_scores(
    model: ModelHandle, key: CorpusScoresKey, _resolve: Resolve, progress: Progress, _p: Partial
) -> CorpusScores:
    return score_corpus(model, corpus_of(model, key.corpus).texts, key.max_tokens, progress)


@register(AtlasKey, lambda key: key.spec)
def _atlas(
    model: ModelHandle, key: AtlasKey, _resolve: Resolve, progress: Progress, _p: Partial
) -> Atlas:
    return compute_atlas(model, corpus_of(model, key.corpus), key.max_tokens, progress=progress)


def loss_tasks(model: ModelHandle, key: ImportanceKey) -> list[LossTask]:
    """The texts of ``key``'s corpus cut to its token budget, as the page cuts them."""
    texts = corpus_of(model, key.corpus).texts
    return budget_tasks(model, texts, key.budget, key.max_tokens)


def curve_of(
    model: ModelHandle,
    tasks: list[LossTask],
    importance: CorpusImportance,
    ranking: Ranking,
    method: AblationMethod,
    progress: Progress,
) -> tuple[list[int], np.ndarray]:
    """The loss with the k least important heads (by ``ranking``) ablated together, for the
    page's points k; mean ablation takes the heads' corpus means (measured now if the
    importance did not keep them)."""
    order = pruning_order(importance.ranking(ranking))
    means = importance.means
    if method == "mean" and means is None:
        means = corpus_means(model, tasks)
    return pruning_curve(model, tasks, order, method, means, progress)


@register(ImportanceKey, lambda key: key.spec)
def _importance(
    model: ModelHandle, key: ImportanceKey, _resolve: Resolve, progress: Progress, _p: Partial
) -> CorpusImportance:
    return measure_corpus_importance(model, loss_tasks(model, key), key.methods, progress)


@register(CurveKey, lambda key: key.importance.spec)
def _curve(
    model: ModelHandle, key: CurveKey, resolve: Resolve, progress: Progress, _p: Partial
) -> tuple[list[int], np.ndarray]:
    tasks = loss_tasks(model, key.importance)
    return curve_of(model, tasks, resolve(key.importance), key.ranking, key.method, progress)


def weighting_of(model: ModelHandle, run: AttentionRun, progress: Progress) -> ValueWeighting:
    """``run``'s value weighting, with the value norms the capture kept, or else from one pass
    over the value hooks (and a gated layer's norms per query and key from its gates)."""
    ids = torch.tensor([run.token_ids])
    norms = getattr(run.store, "value_norms", None)
    gates = run.extras.gates if run.extras is not None else {}
    values = layer_values(model, ids) if norms is None or gates else None  # one pass for both
    if norms is None:
        norms = value_norms(model, ids, values)
    pairs = gated_norms(model, ids, gates, values)
    return value_weighting(run, norms, THUMB, progress, pairs=pairs)


@register(WeightingKey, lambda key: key.run.spec)
def _weighting(
    model: ModelHandle, key: WeightingKey, resolve: Resolve, progress: Progress, _p: Partial
) -> ValueWeighting:
    return weighting_of(model, resolve(key.run), progress)


@register(HeadMarksKey, lambda key: key.run.spec)
def _marks(
    model: ModelHandle, key: HeadMarksKey, resolve: Resolve, _progress: Progress, _p: Partial
) -> dict[Head, str]:
    return head_marks(prompt_scores(resolve(key.run)), Thresholds())


@register(SinkKey, lambda key: key.run.spec)
def _sink(
    model: ModelHandle, key: SinkKey, resolve: Resolve, _progress: Progress, _p: Partial
) -> int:
    return strongest_sink(resolve(key.run), key.head.layer, key.head.index)


@register(SinkSummaryKey, lambda key: key.run.spec)
def _sink_summary(
    model: ModelHandle, key: SinkSummaryKey, resolve: Resolve, _progress: Progress, _p: Partial
) -> SinkSummary:
    return measured_sink(resolve(key.run))


@register(PrecisionKey, lambda key: key.run.spec)
def _precision(
    model: ModelHandle, key: PrecisionKey, resolve: Resolve, progress: Progress, _p: Partial
) -> PatternDifference | None:
    return pattern_difference(model, resolve(key.run), progress=progress)


def words_for(model: ModelHandle, run: AttentionRun) -> Words:
    """Which tokens of ``run`` form each word (``models.capture.words.WORD_RULE``)."""
    return split_words(model.tokenizer, run.prompt, run.token_ids, run.tokens)


def span_of(
    run: AttentionRun, key: SpanKey, words: Words | None, weighting: ValueWeighting | None
) -> np.ndarray:
    """The strip's weights for ``key``'s span (its units: tokens, or ``words``)."""
    units = unit_range(range(*key.span), words)
    head = key.head
    return span_weights(
        run,
        key.scope,
        head.layer,
        head.index,
        slice(units.start, units.stop),
        key.direction,
        words,
        weighting,
    )


def rollout_of(
    run: AttentionRun, key: RolloutKey, words: Words | None, progress: Progress
) -> np.ndarray:
    """Attention rollout from (or to) ``key``'s selection (its units: tokens, or ``words``)."""
    units = unit_range(range(*key.span), words)
    return rollout_weights(
        run, slice(units.start, units.stop), key.direction, words, progress=progress
    )


def overview_of(run: AttentionRun, head: Head, weighting: ValueWeighting | None) -> str:
    """Head ``head``'s whole pattern max-pooled to at most :data:`OVERVIEW` pixels, as a PNG
    data URI (a linear-attention layer's signed mixing matrix on the signed scale, never
    value-weighted)."""
    if run.signed(head.layer):
        signed = pooled_signed(run, head.layer, OVERVIEW)[head.index : head.index + 1]
        return data_uri(signed_pngs(signed, OVERVIEW)[0])
    pooled = head_overview(run, head.layer, head.index, OVERVIEW, weighting)
    return data_uri(pooled_png(pooled, OVERVIEW, normalise=True))


@register(OverviewKey, lambda key: key.run.spec)
def _overview(
    model: ModelHandle, key: OverviewKey, resolve: Resolve, _progress: Progress, _p: Partial
) -> str:
    weighting = resolve(WeightingKey(key.run)) if key.weighted else None
    return overview_of(resolve(key.run), key.head, weighting)


TOP_EFFECTS = 5  # the parts of a cell "why here" removes one at a time


@register(WhyKey, lambda key: key.run.spec)
def _why(
    model: ModelHandle, key: WhyKey, resolve: Resolve, progress: Progress, _p: Partial
) -> KeptHead:
    """Head ``key.head``'s queries and keys kept as parts on the run's tokens (one pass)."""
    run = resolve(key.run)
    return keep(model, torch.tensor([run.token_ids]), key.head, progress)


def effects_of(model: ModelHandle, kept: KeptHead, key: WhyEffectsKey) -> tuple[PartEffect, ...]:
    """What removing each of the top parts of ``key``'s cell does, the norm scales free."""
    return tuple(part_effects(model, kept, split(kept, key.query, key.key), TOP_EFFECTS))


@register(WhyEffectsKey, lambda key: key.why.run.spec)
def _why_effects(
    model: ModelHandle, key: WhyEffectsKey, resolve: Resolve, progress: Progress, _p: Partial
) -> tuple[PartEffect, ...]:
    kept = resolve(key.why)
    progress(0.0, "removing the top parts with the scales free")
    return effects_of(model, kept, key)


@register(SpanKey, lambda key: key.run.spec)
def _span(
    model: ModelHandle, key: SpanKey, resolve: Resolve, _progress: Progress, _p: Partial
) -> np.ndarray:
    run = resolve(key.run)
    weighting = resolve(WeightingKey(key.run)) if key.weighted else None
    return span_of(run, key, words_for(model, run) if key.words else None, weighting)


@register(RolloutKey, lambda key: key.run.spec)
def _rollout(
    model: ModelHandle, key: RolloutKey, resolve: Resolve, progress: Progress, _p: Partial
) -> np.ndarray:
    run = resolve(key.run)
    return rollout_of(run, key, words_for(model, run) if key.words else None, progress)


@register(CompareKey, lambda key: key.run_a.spec)
def _compare(
    model: ModelHandle, key: CompareKey, resolve: Resolve, progress: Progress, _p: Partial
) -> Comparison:
    run_a, run_b = resolve(key.run_a), resolve(key.run_b)
    if not key.words:
        return head_divergence(run_a, run_b, None, None, progress=progress)
    words = words_for(model, run_a), words_for(model, run_b)
    return head_divergence(run_a, run_b, *words, progress=progress)
