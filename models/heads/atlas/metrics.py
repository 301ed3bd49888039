"""Every per-head quantity the atlas shows: its name, words, unit, how sure it is, and where it
does not apply.

A :class:`Measure` is one quantity for every head (``layer head_index``), with its standard error
where the quantity is a mean over samples. The rule for uncertainty follows the source
(:data:`UNCERTAINTY`): a mean over corpus texts or random sequences carries the standard error of
that mean (each text one observation, as the head finder counts them; ± 2 SE is about a 95 %
interval); a score read off the weights, or a single prompt's attribution, has no sampling error
and none is claimed.

A head ranks among the heads where the quantity applies and was measured, largest value first
(rank 1); ties share the better rank.

Some quantities do not apply to some heads: a linear-attention layer (Gated DeltaNet) has no
softmax pattern, so no pattern score means anything there; the card says so per quantity rather
than show a number. A head with a learned sink (gpt-oss) has its entropy over the full row, the
sink included, and its distance over the keys only (the sink is at no position): the card says
that too (:func:`variant_note`). What each layer computes is
:class:`models.model.variants.LayerVariant`, read from the loaded model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from jaxtyping import Bool, Float, Int

from models.model.variants import LayerVariant

MetricName = Literal[
    "induction",
    "induction_text",
    "previous_token",
    "duplicate_token",
    "current_token",
    "sink",
    "entropy",
    "distance",
    "activation",
    "ov_copying",
    "qk_previous",
    "direct_logit",
    "zero_ablation",
    "mean_ablation",
    "layer",
    "head_index",
]
METRIC_NAMES: tuple[MetricName, ...] = get_args(MetricName)
MetricSource = Literal["corpus", "repeated", "weights", "prompt", "ablation", "position"]


@dataclass(frozen=True)
class MetricInfo:
    """How a quantity is named and read.

    Attributes:
        label: a short header.
        unit: what one unit is ("" for a share or a score).
        source: where the number comes from (sets the uncertainty rule).
        help: one sentence for a newcomer.
        pattern: it is read from the softmax pattern (does not apply to linear attention).
        twin: for a weight score, the corpus score that measures the same thing on data.
    """

    label: str
    unit: str
    source: MetricSource
    help: str
    pattern: bool = False
    twin: MetricName | None = None


METRICS: dict[MetricName, MetricInfo] = {
    "induction": MetricInfo(
        "Induction",
        "",
        "repeated",
        "On [start, r, r] random tokens: weight a second-half query puts on the token after its "
        "earlier copy.",
        pattern=True,
    ),
    "induction_text": MetricInfo(
        "Induction (corpus)",
        "",
        "corpus",
        "Weight on the token after the previous copy of the query's token, on the corpus.",
        pattern=True,
    ),
    "previous_token": MetricInfo(
        "Previous token",
        "",
        "corpus",
        "Weight a token puts on the token before it.",
        pattern=True,
    ),
    "duplicate_token": MetricInfo(
        "Duplicate token",
        "",
        "corpus",
        "Weight a repeated token puts on its earlier copies.",
        pattern=True,
    ),
    "current_token": MetricInfo(
        "Current token", "", "corpus", "Weight a token puts on itself.", pattern=True
    ),
    "sink": MetricInfo(
        "Sink (first token)",
        "",
        "corpus",
        "Mean weight the other queries put on the first token (Gu et al. 2024).",
        pattern=True,
    ),
    "entropy": MetricInfo(
        "Entropy",
        "nats",
        "corpus",
        "Entropy of a query's row: 0 = one key, ln m = spread evenly over m keys.",
        pattern=True,
    ),
    "distance": MetricInfo(
        "Distance back",
        "tokens",
        "corpus",
        "Attention-weighted distance from a query back to its keys (negative = ahead).",
        pattern=True,
    ),
    "activation": MetricInfo(
        "Activation",
        "",
        "corpus",
        "Strongest weight in a text, the first key left out; averaged over the texts.",
        pattern=True,
    ),
    "ov_copying": MetricInfo(
        "OV copying",
        "",
        "weights",
        "Σλ / Σ|λ| over the OV circuit's eigenvalues: 1 copies its input, -1 suppresses it.",
        twin="induction",
    ),
    "qk_previous": MetricInfo(
        "QK previous token",
        "",
        "weights",
        "The weights' own previous-token weight for an average token, no text needed.",
        pattern=True,
        twin="previous_token",
    ),
    "direct_logit": MetricInfo(
        "Direct logit attribution",
        "logits",
        "prompt",
        "The head's direct share of logit(answer) - logit(wrong) on the circuits prompt.",
    ),
    "zero_ablation": MetricInfo(
        "Loss change, zeroed",
        "nats/token",
        "ablation",
        "Corpus loss with the head's output set to zero, minus the clean loss.",
    ),
    "mean_ablation": MetricInfo(
        "Loss change, mean-ablated",
        "nats/token",
        "ablation",
        "Corpus loss with the head's output replaced by its mean, minus the clean loss.",
    ),
    "layer": MetricInfo("Layer", "", "position", "The head's layer, counted from 0."),
    "head_index": MetricInfo("Head index", "", "position", "The head within its layer."),
}

UNCERTAINTY: dict[MetricSource, str] = {
    "corpus": "± standard error of the mean over the corpus texts (± 2 SE ≈ 95 %)",
    "repeated": "± standard error of the mean over the random sequences (± 2 SE ≈ 95 %)",
    "ablation": "± standard error of the mean over the corpus texts (± 2 SE ≈ 95 %)",
    "weights": "exact: read off the weights, no sampling",
    "prompt": "one prompt: no spread over texts",
    "position": "exact",
}


@dataclass(frozen=True)
class Measure:
    """One quantity for every head.

    Attributes:
        values: ``layer head_index`` (NaN where not measured).
        se: ``layer head_index`` standard errors, or None where the source has none.
        applies: ``layer head_index``: False where the quantity does not apply to the head.
    """

    values: Float[np.ndarray, "layer head_index"]
    se: Float[np.ndarray, "layer head_index"] | None
    applies: Bool[np.ndarray, "layer head_index"]

    def ranks(self) -> Int[np.ndarray, "layer head_index"]:
        """Rank among the heads that apply and were measured, largest first; 0 elsewhere."""
        values = np.where(self.applies, self.values, np.nan)
        ranked = np.isfinite(values)
        order = np.sort(values[ranked])[::-1]
        out = np.zeros(values.shape, dtype=int)
        # the number of strictly larger values, plus one: ties share the better rank
        out[ranked] = len(order) - np.searchsorted(order[::-1], values[ranked], side="right") + 1
        return out


def not_applicable(metric: MetricName, layer: LayerVariant) -> str | None:
    """Why ``metric`` does not apply to a head of ``layer``, or None when it does."""
    if METRICS[metric].pattern and not layer.softmax:
        return "a linear-attention layer has no softmax pattern (its mixing weights are signed)"
    return None


def variant_note(metric: MetricName, layer: LayerVariant) -> str | None:
    """How ``metric`` is read on a head of ``layer`` where that differs from a plain softmax."""
    if layer.sinks and metric == "entropy":
        return "over the full row, the learned sink included"
    if layer.sinks and metric == "distance":
        return "over the keys only: the learned sink is at no position"
    return None


def applies_grid(
    metric: MetricName, layers: Sequence[LayerVariant], n_heads: int
) -> Bool[np.ndarray, "layer head_index"]:
    """``layer head_index``: where ``metric`` applies."""
    rows = [not_applicable(metric, layer) is None for layer in layers]
    return np.repeat(np.array(rows, dtype=bool)[:, None], n_heads, axis=1)
