"""Every kind of costly work the server does, as a key type holding what changes its result
and saying (its type parameter) what the result is.

A key is what a job is queued under and what its result is kept under: two sessions asking for
the same key share one job and one result, and a session's new key of the same kind supersedes
its old one (see :mod:`ui.runtime.jobs`). The class is the kind; its fields are everything that
changes the result, so a stale result can never be served for a changed setting. No Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.attention.check import KernelDType, KernelReport
from models.capture.compare import Comparison
from models.capture.difference import DifferenceOverview
from models.capture.precision import PatternDifference
from models.capture.run import AttentionRun
from models.capture.sinks import SinkSummary
from models.capture.spans import Direction
from models.capture.views import Scope
from models.capture.weighted import ValueWeighting
from models.capture.words import Words
from models.circuits.findings import AtPFindings, WeightFindings
from models.circuits.loadings import Loadings
from models.circuits.patching import Baseline
from models.circuits.paths import MLPMode, PathResult
from models.circuits.task import CircuitTask
from models.circuits.why_effects import PartEffect
from models.circuits.why_keep import KeptHead
from models.classroom.real import LayerActivations
from models.generate.generation import Generation
from models.generate.settings import GenerationSettings
from models.generate.sweep import EvictionResult, EvictionSettings
from models.head import Head
from models.heads.atlas.compute import Atlas
from models.heads.finding.corpus import Corpus
from models.heads.finding.corpus_scores import CorpusScores
from models.heads.finding.induction import RepeatedScores
from models.heads.names import AblationMethod, Ranking
from models.heads.pruning.export import PruneReport
from models.heads.pruning.importance import CorpusImportance
from models.model.weights import Projection
from models.scaling.capture import FactorLoss, ScoreCapture
from models.scaling.maths import SweepStats, SyntheticPanel
from ui.runtime.policy import AllowedSpec
from ui.runtime.store import JobKey


@dataclass(frozen=True)
class ConvertKey(JobKey[Path]):
    """A GGUF file dequantised into the app's cache (``content`` is its hash)."""

    path: str
    content: str


@dataclass(frozen=True)
class RunKey(JobKey[AttentionRun]):
    """One prompt's attention on one model, cut to ``max_tokens`` (None: the model's context)."""

    spec: AllowedSpec
    prompt: str
    max_tokens: int | None


@dataclass(frozen=True)
class WeightingKey(JobKey[ValueWeighting]):
    """A run's value weighting (Kobayashi et al. 2020)."""

    run: RunKey


@dataclass(frozen=True)
class ThumbnailsKey(JobKey[list[dict[str, str]]]):
    """Every head's max-pooled picture of a run, as PNG data URIs."""

    run: RunKey
    weighted: bool


@dataclass(frozen=True)
class OverviewKey(JobKey[str]):
    """One head's whole pattern max-pooled to an overview picture."""

    run: RunKey
    head: Head
    weighted: bool


@dataclass(frozen=True)
class SinkKey(JobKey[int]):
    """The key position one head sinks most weight into."""

    run: RunKey
    head: Head


@dataclass(frozen=True)
class SinkSummaryKey(JobKey[SinkSummary]):
    """Which key the run's heads sink into, measured on a few rows of every head."""

    run: RunKey


@dataclass(frozen=True)
class HeadMarksKey(JobKey[dict[Head, str]]):
    """Which heads this prompt's own attention marks as induction, previous-token or sink."""

    run: RunKey


@dataclass(frozen=True)
class RepeatedKey(JobKey[RepeatedScores]):
    """Induction and other scores on repeated random tokens."""

    persist = True

    spec: AllowedSpec
    seq_len: int
    batch: int
    seed: int


@dataclass(frozen=True)
class CorpusKey(JobKey[Corpus]):
    """A model's bundled corpus."""

    spec: AllowedSpec


@dataclass(frozen=True)
class CorpusScoresKey(JobKey[CorpusScores]):
    """Every head's scores over a corpus (``corpus`` is the corpus's content key)."""

    persist = True

    spec: AllowedSpec
    corpus: str
    max_tokens: int


@dataclass(frozen=True)
class WhyKey(JobKey[KeptHead]):
    """One head's queries and keys kept as parts on a run's tokens, for "why here"."""

    run: RunKey
    head: Head


@dataclass(frozen=True)
class WhyEffectsKey(JobKey[tuple[PartEffect, ...]]):
    """What removing a cell's top parts does, with the norm scales free."""

    why: WhyKey
    query: int
    key: int


@dataclass(frozen=True)
class AtlasKey(JobKey[Atlas]):
    """Every head of a model measured on a corpus, for the atlas and its cards (``corpus`` is
    the corpus's content key)."""

    persist = True

    spec: AllowedSpec
    corpus: str
    max_tokens: int


@dataclass(frozen=True)
class ImportanceKey(JobKey[CorpusImportance]):
    """Every head's pruning importance over a corpus's first ``budget`` tokens."""

    persist = True

    spec: AllowedSpec
    corpus: str
    budget: int
    max_tokens: int
    methods: tuple[str, ...]


@dataclass(frozen=True)
class CurveKey(JobKey[tuple[list[int], np.ndarray]]):
    """The loss with the k least important heads ablated together, for several k."""

    persist = True

    importance: ImportanceKey
    ranking: Ranking
    method: AblationMethod


@dataclass(frozen=True)
class PruneKey(JobKey[PruneReport]):
    """A pruned checkpoint of ``heads`` in ``dtype``, written, timed and zipped."""

    importance: ImportanceKey
    heads: tuple[Head, ...]
    dtype: str


@dataclass(frozen=True)
class PresetsKey(JobKey[dict[str, CircuitTask]]):
    """The circuits page's ready-made tasks for a model."""

    spec: AllowedSpec


@dataclass(frozen=True)
class CircuitKey(JobKey[Baseline]):
    """The clean and corrupted runs of a circuit task."""

    spec: AllowedSpec
    task: CircuitTask


@dataclass(frozen=True)
class HeadPatchKey(JobKey[np.ndarray]):
    """Every head's output patched from the clean run into the corrupted run."""

    persist = True

    circuit: CircuitKey


@dataclass(frozen=True)
class PositionPatchKey(JobKey[np.ndarray]):
    """One head patched at one position at a time."""

    persist = True

    circuit: CircuitKey
    head: Head


@dataclass(frozen=True)
class LogitsKey(JobKey[ScoreCapture]):
    """Every head's attention logits on a prompt (the scaling sweep's input)."""

    spec: AllowedSpec
    prompt: str
    max_tokens: int


@dataclass(frozen=True)
class SweepKey(JobKey[SweepStats]):
    """Row statistics of every head at each factor."""

    logits: LogitsKey
    factors: tuple[float, ...]


@dataclass(frozen=True)
class LossSweepKey(JobKey[list[FactorLoss]]):
    """The model's loss with every head's logits multiplied by each factor."""

    logits: LogitsKey
    factors: tuple[float, ...]


@dataclass(frozen=True)
class SyntheticKey(JobKey[SyntheticPanel]):
    """The synthetic panel: random q and k at several widths, from one seed."""

    seed: int


@dataclass(frozen=True)
class KernelKey(JobKey[KernelReport]):
    """The app's kernel against the model on every head of a prompt."""

    spec: AllowedSpec
    prompt: str
    dtype: KernelDType
    max_tokens: int


@dataclass(frozen=True)
class LayerKey(JobKey[LayerActivations]):
    """One layer's q, k, v, scores, pattern and output on a prompt (the classroom)."""

    spec: AllowedSpec
    prompt: str
    layer: int
    max_tokens: int


@dataclass(frozen=True)
class WordsKey(JobKey[Words]):
    """Which tokens of a run form each word (the word view)."""

    run: RunKey


@dataclass(frozen=True)
class CompareKey(JobKey[Comparison]):
    """Every head's divergence between prompt A's run and prompt B's, in tokens or words."""

    persist = True

    run_a: RunKey
    run_b: RunKey
    words: bool


@dataclass(frozen=True)
class RolloutKey(JobKey[np.ndarray]):
    """Attention rollout from (or to) a span of a run's tokens, or of its words."""

    run: RunKey
    span: tuple[int, int]
    direction: Direction
    words: bool


@dataclass(frozen=True)
class SpanKey(JobKey[np.ndarray]):
    """Attention from (or to) a span of a run's tokens, or of its words, over one head, its
    layer or every head; value-weighted or not."""

    run: RunKey
    scope: Scope
    head: Head
    span: tuple[int, int]
    direction: Direction
    words: bool
    weighted: bool


@dataclass(frozen=True)
class DifferenceOverviewKey(JobKey[DifferenceOverview]):
    """One head's whole |A − B| in a comparison, max-pooled to an overview picture."""

    compare: CompareKey
    head: Head


@dataclass(frozen=True)
class GenerationKey(JobKey[Generation]):
    """The model writing after a prompt (``settings`` as they run, seed included)."""

    spec: AllowedSpec
    prompt: str
    settings: GenerationSettings


@dataclass(frozen=True)
class EvictionKey(JobKey[tuple[EvictionResult, float]]):
    """Perplexity of a text under each cache-eviction policy and budget, and without eviction."""

    persist = True

    spec: AllowedSpec
    text: str
    settings: EvictionSettings


@dataclass(frozen=True)
class AttributionKey(JobKey[AtPFindings]):
    """Attribution patching of a circuit task: the clean and corrupted passes made once, and
    everything read from them (AtP, AtP*, the heads checked exactly, the edge estimates)."""

    persist = True

    circuit: CircuitKey
    qk_fix: bool
    grad_drop: bool
    verify_top: int
    edges: MLPMode | None  # how edge estimates treat MLPs; None: no edge estimates


@dataclass(frozen=True)
class PathKey(JobKey[PathResult]):
    """Path patching from every earlier head into one receiver's q, k or v."""

    persist = True

    circuit: CircuitKey
    receiver: Head
    input: Projection
    mlps: MLPMode


@dataclass(frozen=True)
class DlaLoadingsKey(JobKey[Loadings]):
    """One head's direct logit attribution split by the earlier head whose output it reads."""

    circuit: CircuitKey
    head: Head


@dataclass(frozen=True)
class PathLoadingsKey(JobKey[Loadings]):
    """A path patching result against patching the receiver's whole input once."""

    path: PathKey


@dataclass(frozen=True)
class WeightsKey(JobKey[WeightFindings]):
    """What a model's weights say per head (copying, QK positions) and between heads
    (composition)."""

    persist = True

    spec: AllowedSpec


@dataclass(frozen=True)
class PrecisionKey(JobKey[PatternDifference | None]):
    """A low-precision run's largest pattern difference from float32, on its first rows."""

    run: RunKey
