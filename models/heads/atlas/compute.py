"""The atlas: every head of a model measured on one corpus, in one function with one price.

:func:`compute_atlas` runs, under one progress callback (which may raise
:class:`models.progress.Cancelled` at any step):

1. the repeated-random-token scores (induction) and the corpus scores with their standard
   errors (:mod:`models.heads.finding`), and the head finder's flags;
2. the weight scores (OV copying, QK previous token; :mod:`models.circuits.weight_circuits`);
3. a pass over the corpus for each head's peak on each text and the moments of its four spaces,
   then one for the tokens that load most on each principal component
   (:mod:`models.heads.atlas.passes`).

Direct logit attribution and ablation importance are slow and tied to a task or a loss: they
join the atlas when the caller has measured them (``dla``, ``importance``), and stay NaN ("not
measured") otherwise. :func:`atlas_estimate` prices the whole run before it starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from jaxtyping import Float

from models.circuits.cost import weights_cost
from models.circuits.task import CircuitsUnavailable
from models.circuits.weight_circuits import weight_scores
from models.cost import Cost, device_of
from models.heads.atlas.lowrank import SPACES, LowRank, Moments, Space, layer_components
from models.heads.atlas.lowrank import stack_layers as stack
from models.heads.atlas.metrics import (
    METRIC_NAMES,
    Measure,
    MetricName,
    applies_grid,
)
from models.heads.atlas.passes import first_pass, second_pass
from models.heads.atlas.peaks import Peaks
from models.heads.atlas.pictures import PICTURE, picture_text
from models.heads.cost import forward_peak_bytes
from models.heads.finding.corpus import Corpus
from models.heads.finding.corpus_scores import CorpusScores, score_corpus, score_estimate
from models.heads.finding.induction import (
    DEFAULT_BATCH,
    DEFAULT_SEED,
    DEFAULT_SEQ_LEN,
    measure_repeated,
    repeated_estimate,
)
from models.heads.finding.spread import Spread, spread
from models.heads.pruning.importance import CorpusImportance
from models.heads.table import Thresholds, corpus_flag_grids, repeated_spread
from models.model.facts import ModelFacts
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from models.model.variants import LayerVariant, layer_variants
from models.progress import Progress, part, quiet
from models.shapes import TokenIds

CORPUS_SCORES: tuple[MetricName, ...] = (
    "induction_text",
    "previous_token",
    "duplicate_token",
    "current_token",
    "sink",
    "entropy",
    "distance",
)
# share of the progress bar each step fills
# Fixed seconds per text and layer of each extra pass: the hooks read every head's peaks,
# moments and top-loading tokens in Python. Measured with the passes timed alone: about 2 ms
# a text and layer on the bundled model and on SmolLM2 (24 texts of about 100 and 160 tokens),
# beyond the passes' arithmetic (``python -m benchmarks.estimates`` checks the whole atlas);
# a GPU launches the same hooks from Python.
PASS_LAYER_S = {"cpu": 0.003, "cuda": 0.003}
STEPS = {"repeated": 0.1, "corpus": 0.35, "weights": 0.1, "first": 0.25, "second": 0.2}


@dataclass(frozen=True)
class Atlas:
    """Every head of one model on one corpus.

    Attributes:
        facts: the model's shape.
        corpus: the corpus's name; ``corpus_key`` its content hash; ``source`` where it is from.
        texts: the passages; ``tokens`` their readable tokens as scored (after any cut).
        measures: every quantity of :data:`METRIC_NAMES` for every head.
        flags: score name (:data:`models.heads.names.SCORE_NAMES`) -> ``layer head_index``
            verdicts of the head finder (lower bound above ``thresholds``).
        layers: what each layer's attention computes (for "not applicable").
        peaks: where each head peaks on each text (its activation).
        lowrank: the four spaces' principal components and top-loading tokens.
        notes: how things were computed, and what was not.
        pictures: ``layer head_index pixel pixel`` each head's pattern on text
            ``pictured`` (the longest), max-pooled (:mod:`models.heads.atlas.pictures`).
        pictured: which text the pictures show.
    """

    facts: ModelFacts
    corpus: str
    corpus_key: str
    source: str
    texts: tuple[str, ...]
    tokens: tuple[tuple[str, ...], ...]
    measures: dict[MetricName, Measure]
    flags: dict[str, np.ndarray]
    thresholds: Thresholds
    layers: tuple[LayerVariant, ...]
    peaks: Peaks
    lowrank: dict[Space, LowRank]
    notes: tuple[str, ...]
    pictures: np.ndarray
    pictured: int

    @property
    def n_texts(self) -> int:
        return len(self.texts)

    @property
    def n_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)


def _measure(
    values: np.ndarray, se: np.ndarray | None, name: MetricName, layers: Sequence[LayerVariant]
) -> Measure:
    applies = applies_grid(name, layers, values.shape[-1])
    return Measure(np.asarray(values, dtype=np.float64), se, applies)


def _from_spread(values: Spread, name: MetricName, layers: Sequence[LayerVariant]) -> Measure:
    return _measure(values.mean, values.se, name, layers)


def assemble_measures(
    facts: ModelFacts,
    layers: Sequence[LayerVariant],
    spreads: dict[MetricName, Spread],
    exact: dict[MetricName, np.ndarray],
) -> dict[MetricName, Measure]:
    """Every metric of :data:`METRIC_NAMES`: those in ``spreads`` with their standard errors,
    those in ``exact`` without, position by position, and NaN ("not measured") for the rest."""
    shape = (facts.n_layers, facts.n_heads)
    grid_layer, grid_head = np.indices(shape).astype(np.float64)
    positions = {"layer": grid_layer, "head_index": grid_head}
    out: dict[MetricName, Measure] = {}
    for name in METRIC_NAMES:
        if name in spreads:
            out[name] = _from_spread(spreads[name], name, layers)
        else:
            values = positions.get(name, exact.get(name, np.full(shape, np.nan)))
            out[name] = _measure(values, None, name, layers)
    return out


def with_importance(atlas: Atlas, importance: CorpusImportance) -> Atlas:
    """``atlas`` with the ablation measures of ``importance`` (over its own corpus texts)
    filled in: zero-ablation, and mean-ablation when it was measured, each with its standard
    error over the texts."""
    measures = dict(atlas.measures)
    names: dict[str, MetricName] = {"zero": "zero_ablation", "mean": "mean_ablation"}
    for method, name in names.items():
        if method in importance.spreads:
            measures[name] = _from_spread(importance.spreads[method], name, atlas.layers)
    note = (
        f"ablation importance on {importance.n_texts} text{'s' if importance.n_texts != 1 else ''}"
    )
    return replace(atlas, measures=measures, notes=_noted(atlas.notes, "ablation importance", note))


def with_dla(atlas: Atlas, dla: np.ndarray, task: str) -> Atlas:
    """``atlas`` with each head's direct logit attribution on one circuits task (``layer
    head_index`` logits; one prompt, so no standard error)."""
    measures = dict(atlas.measures)
    values = np.asarray(dla, dtype=np.float64)
    measures["direct_logit"] = _measure(values, None, "direct_logit", atlas.layers)
    note = f"direct logit attribution on {task}"
    return replace(
        atlas, measures=measures, notes=_noted(atlas.notes, "direct logit attribution", note)
    )


def _noted(notes: tuple[str, ...], subject: str, note: str) -> tuple[str, ...]:
    """``notes`` with ``note`` in place of what they said of ``subject`` before (its "not
    measured", or an earlier measurement's note)."""
    return (*(n for n in notes if not n.startswith(subject)), note)


def _weights(model: ModelHandle, progress: Progress) -> tuple[dict[MetricName, np.ndarray], str]:
    try:
        found = weight_scores(model, progress=progress)
    except CircuitsUnavailable as err:
        return {}, f"weight scores not measured: {err}"
    return {"ov_copying": found.copying, "qk_previous": found.qk_prev}, "; ".join(found.notes)


def _lowrank(
    model: ModelHandle,
    encoded: Sequence[TokenIds],
    moments: dict[Space, list[Moments]],
    progress: Progress,
) -> dict[Space, LowRank]:
    components = {s: layer_components(moments[s]) for s in SPACES}
    tops = second_pass(model, encoded, components, progress)
    shared = model.facts.n_kv_heads < model.facts.n_heads
    return {s: stack(components[s], tops[s], shared and s in ("key", "value")) for s in SPACES}


def compute_atlas(
    model: ModelHandle,
    corpus: Corpus,
    max_tokens: int | None = None,
    thresholds: Thresholds | None = None,
    repeated: tuple[int, int, int] = (DEFAULT_SEQ_LEN, DEFAULT_BATCH, DEFAULT_SEED),
    importance: CorpusImportance | None = None,
    dla: Float[np.ndarray, "layer head_index"] | None = None,
    progress: Progress = quiet,
) -> Atlas:
    """Every head of ``model`` on ``corpus`` (see the module docstring).

    Args:
        model: a loaded model.
        corpus: the texts.
        max_tokens: most tokens per text (the model's context when None).
        thresholds: the head finder's flag thresholds (its defaults when None).
        repeated: ``(seq_len, batch, seed)`` of the repeated random tokens.
        importance: ablation importance over this corpus, if measured.
        dla: direct logit attribution per head on a circuits prompt, if measured.
        progress: ``progress(fraction, text)``; may raise to stop.
    """
    facts, layers = model.facts, layer_variants(model)
    thresholds = thresholds or Thresholds()
    seq_len, batch, seed = repeated
    at = np.cumsum([0.0, *STEPS.values()])
    rep = measure_repeated(model, seq_len, batch, seed, progress=part(progress, at[0], at[1]))
    scores = score_corpus(model, corpus.texts, max_tokens, part(progress, at[1], STEPS["corpus"]))
    exact, weight_note = _weights(model, part(progress, at[2], STEPS["weights"]))
    encoded = [tokenize(model, text, max_tokens)[0] for text in corpus.texts]
    peaks, moments, pictures = first_pass(model, encoded, part(progress, at[3], STEPS["first"]))
    lowrank = _lowrank(model, encoded, moments, part(progress, at[4], STEPS["second"]))
    spreads: dict[MetricName, Spread] = {
        "induction": repeated_spread(rep),
        **{name: scores.spreads[name] for name in CORPUS_SCORES},
        "activation": spread(peaks.value),
    }
    if importance is not None:
        spreads["zero_ablation"] = importance.spreads["zero"]
        if "mean" in importance.spreads:
            spreads["mean_ablation"] = importance.spreads["mean"]
    if dla is not None:
        exact["direct_logit"] = np.asarray(dla, dtype=np.float64)
    progress(1.0, "done")
    return Atlas(
        facts=facts,
        corpus=corpus.name,
        corpus_key=corpus.key,
        source=corpus.source,
        texts=corpus.texts,
        tokens=scores.tokens,
        measures=assemble_measures(facts, layers, spreads, exact),
        flags=corpus_flag_grids(rep, scores, thresholds),
        thresholds=thresholds,
        layers=tuple(layers),
        peaks=peaks,
        lowrank=lowrank,
        notes=_notes(scores, _repeated_note(seq_len, batch), weight_note, importance, dla),
        pictures=pictures,
        pictured=picture_text([int(ids.shape[1]) for ids in encoded]) if encoded else 0,
    )


def _repeated_note(seq_len: int, batch: int) -> str:
    return f"induction on {batch} sequences of [start, {seq_len} random tokens, repeated]"


def _notes(
    scores: CorpusScores,
    repeated: str,
    weights: str,
    importance: CorpusImportance | None,
    dla: np.ndarray | None,
) -> tuple[str, ...]:
    notes = [
        f"corpus scores over {scores.n_texts} texts ({scores.n_tokens:,} tokens)",
        repeated,
        weights,
    ]
    if scores.n_cut:
        notes.append(f"{scores.n_cut} texts cut to the token limit")
    if importance is None:
        notes.append("ablation importance not measured")
    if dla is None:
        notes.append("direct logit attribution not measured")
    return tuple(notes)


def moments_bytes(facts: ModelFacts) -> int:
    """Bytes of the running moments of the four spaces (float64 ``d x d`` per head)."""
    per_layer = 2 * (facts.n_heads + facts.n_kv_heads) * (facts.d_head**2 + facts.d_head)
    return 8 * facts.n_layers * per_layer


def atlas_estimate(
    model: ModelHandle,
    sizes: Sequence[int],
    repeated: tuple[int, int, int] = (DEFAULT_SEQ_LEN, DEFAULT_BATCH, DEFAULT_SEED),
) -> Cost:
    """The cost of :func:`compute_atlas` on texts of ``sizes`` tokens (each already cut),
    before it runs: the steps' own estimates, two more forward passes per text with the hooks
    that read peaks and moments (:data:`PASS_LAYER_S` a text and layer, fixed), and the
    moments' d x d products per token."""
    facts, device = model.facts, device_of(model.spec.device)
    seq_len, batch, _ = repeated
    steps = (
        repeated_estimate(model, seq_len, batch)
        .then(score_estimate(model, sizes))
        .then(weights_cost(model, composition=False).cost)
    )
    vectors = 2 * (facts.n_heads + facts.n_kv_heads) * facts.n_layers * facts.d_head**2
    flops = sum(2 * facts.forward_flops(n) + 2 * 2 * vectors * n for n in sizes)
    n_max = max(sizes, default=1)
    pass_peak = forward_peak_bytes(facts, facts.d_vocab, n_max) + moments_bytes(facts)
    pass_peak += 2 * 4 * facts.n_heads * n_max * n_max  # a layer's pictures: a copy, padded
    held = 8 * len(sizes) * facts.n_total_heads * 20  # peaks, kept rows, per-text scores
    held += 4 * facts.n_total_heads * PICTURE**2
    passes = Cost(
        flops=flops,
        peak_bytes=pass_peak,
        overhead_s=2 * len(sizes) * facts.n_layers * PASS_LAYER_S[device],
        device=device,
    )
    total = steps.then(passes)
    return Cost(total.flops, total.peak_bytes + held, total.overhead_s, device)
