"""The per-head table shared by the page and the command line, its CSV and the prune list.

The table joins both halves of the head finder: the scores over a corpus (and on repeated random
tokens) with their spreads and flags, and, once measured, each head's pruning importance. The
command line's table (:func:`cli_table`) is a selection of the same columns on a one-text corpus.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from models.head import Head
from models.heads.finding.corpus_scores import CorpusScores
from models.heads.finding.induction import RepeatedScores
from models.heads.finding.scores import DEFAULT_SINK_EPS, flag
from models.heads.finding.spread import Spread, spread
from models.heads.names import (
    ABLATION_COLUMN,
    ABLATION_COLUMNS,
    COLUMN_LABELS,
    CORE_COLUMNS,
    EXTRA_COLUMNS,
    SCORE_NAMES,
    AblationMethod,
    Ranking,
)
from models.heads.pruning.importance import CorpusImportance

FLOAT_FORMAT = "%.8g"
VARIANT_SCORES = ("learned_sink", "window_edge")  # scores only some attention variants have
# A cell starting with one of these runs as a formula in a spreadsheet (CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class Thresholds:
    """A head is flagged for a score whose lower bound is strictly above its threshold."""

    induction: float = 0.4
    previous_token: float = 0.4
    duplicate_token: float = 0.3
    current_token: float = 0.3
    sink: float = DEFAULT_SINK_EPS


def spreadsheet_safe(text: str) -> str:
    """Prefix text a spreadsheet would run as a formula with an apostrophe."""
    return "'" + text if text.startswith(FORMULA_START) else text


def _grid(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).ravel()


def repeated_spread(repeated: RepeatedScores) -> Spread:
    """The induction score as a spread over the random sequences."""
    per = repeated.induction_per_sequence
    return spread(per if per is not None else repeated.induction[None])


def corpus_flag_grids(
    repeated: RepeatedScores, scores: CorpusScores, thresholds: Thresholds
) -> dict[str, np.ndarray]:
    """``layer head_index`` flags: a score's lower bound (mean - 2 SE) above its threshold.

    Induction is judged over the repeated random sequences, the other scores over the texts.
    """
    bounds = {
        "induction": repeated_spread(repeated).lower_bound,
        **{name: scores.spreads[name].lower_bound for name in SCORE_NAMES[1:]},
    }
    return {name: flag(bounds[name], getattr(thresholds, name)) for name in SCORE_NAMES}


def _spread_columns(data: dict[str, Any], name: str, values: Spread, digits: int) -> None:
    mean, se, low, high = (_grid(v) for v in (values.mean, values.se, values.low, values.high))
    data.update(
        {
            name: mean,
            f"{name}_se": se,
            f"{name}_min": low,
            f"{name}_max": high,
            f"{name}_lower": _grid(values.lower_bound),
        }
    )
    data[f"{name}_spread"] = [
        spread_text(*row, digits=digits) for row in zip(mean, se, low, high, strict=True)
    ]


def spread_text(mean: float, se: float, low: float, high: float, digits: int = 3) -> str:
    """``± 0.012 · 0.10–0.55`` (or ``one text``), for a column shown beside the mean."""
    if np.isnan(mean):
        return ""
    if np.isnan(se):
        return "one text"
    return f"± {se:.{digits}f} · {low:.{digits - 1}f}–{high:.{digits - 1}f}"


def corpus_table(
    repeated: RepeatedScores,
    scores: CorpusScores,
    thresholds: Thresholds,
    importance: CorpusImportance | None = None,
    sink_logits: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per head: every score's mean over the corpus with its standard error, range and
    lower bound, the flags, the repeated-token scores and, if given, the ablation columns.

    The scores of attention variants (a learned sink's weight, the weight at a sliding
    window's edge) are columns only when some head has them; ``sink_logits`` (``layer
    head_index``, NaN where a layer has none) adds each head's learned sink logit."""
    n_layers, n_heads = repeated.induction.shape
    layers, heads = np.divmod(np.arange(n_layers * n_heads), n_heads)
    flags = corpus_flag_grids(repeated, scores, thresholds)
    names = np.array([COLUMN_LABELS[name] for name in flags])
    stacked = np.stack([_grid(f).astype(bool) for f in flags.values()], axis=-1)
    data: dict[str, Any] = {
        "L.H": [
            str(Head(int(layer), int(index))) for layer, index in zip(layers, heads, strict=True)
        ],
        "layer": layers,
        "head": heads,
        "flags": [", ".join(names[row]) for row in stacked],
    }
    spreads = {"induction": repeated_spread(repeated), **scores.spreads}
    for name, values in spreads.items():
        if name in VARIANT_SCORES and np.isnan(values.mean).all():
            continue  # no head has it (a plain softmax model): no empty columns
        _spread_columns(data, name, values, digits=3)
    if sink_logits is not None:
        data["sink_logit"] = _grid(sink_logits)
    if importance is not None:
        for ranking, values in importance.spreads.items():
            _spread_columns(data, ABLATION_COLUMN[ranking], values, digits=4)
    data["sink_flag"] = _grid(flags["sink"]).astype(bool)
    for name in ("previous_token", "duplicate_token", "current_token"):
        data[f"{name}_repeated"] = _grid(getattr(repeated, name))
    return pd.DataFrame(data)


def cli_table(
    repeated: RepeatedScores,
    scores: CorpusScores,
    thresholds: Thresholds,
    importance: CorpusImportance | None,
    ablation: bool,
    extras: bool,
) -> pd.DataFrame:
    """The command line's table of one text: :data:`CORE_COLUMNS`, then
    :data:`ABLATION_COLUMNS` when ``ablation`` (empty without ``importance``), then
    :data:`EXTRA_COLUMNS` when ``extras`` (the strongest sink's position and token on the
    text)."""
    table = corpus_table(repeated, scores, thresholds, importance)
    columns = CORE_COLUMNS + (ABLATION_COLUMNS if ablation else [])
    if extras:
        positions = scores.top_sink_pos[0].ravel()
        table["top_sink_pos"] = positions
        table["top_sink_token"] = [scores.tokens[0][p] for p in positions]
        columns = columns + EXTRA_COLUMNS
    return table.reindex(columns=columns)


def table_csv(table: pd.DataFrame) -> str:
    """CSV text of a head table; token text is guarded against spreadsheet formulas."""
    out = table.copy()
    if "top_sink_token" in out:
        out["top_sink_token"] = [spreadsheet_safe(str(t)) for t in out["top_sink_token"]]
    text: str = out.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    return text


def _number(value: float) -> float | None:
    """A JSON-safe float: NaN and infinities become ``null``."""
    value = float(value)
    return value if np.isfinite(value) else None


def corpus_prune_list(
    importance: CorpusImportance,
    ranking: Ranking,
    method: AblationMethod,
    order: Sequence[tuple[int, int]],
    ks: Sequence[int],
    losses: Sequence[float],
    model_name: str,
    corpus: str,
) -> dict[str, Any]:
    """The prune list over a corpus: heads from least to most important, and the measured
    corpus loss at each ``k`` of the curve."""
    values = importance.ranking(ranking)
    se = (
        importance.spreads[ranking].se
        if ranking in importance.spreads
        else np.full_like(values, np.nan)
    )
    heads = [Head(int(layer), int(index)) for layer, index in order]
    return {
        "model": model_name,
        "corpus": corpus,
        "texts": importance.n_texts,
        "loss": "mean over texts of next-token cross-entropy"
        if importance.kind == "next_token"
        else "mean over texts of masked-token cross-entropy",
        "scored_tokens": importance.n_targets,
        "ranked_by": ABLATION_COLUMN[ranking],
        "ablation": method,
        "clean_loss": _number(importance.base_loss),
        "order": [
            {
                "rank": i + 1,
                "head": str(head),
                "layer": head.layer,
                "head_index": head.index,
                "importance": _number(values[head]),
                "standard_error": _number(se[head]),
            }
            for i, head in enumerate(heads)
        ],
        "curve": [{"k": int(k), "loss": _number(loss)} for k, loss in zip(ks, losses, strict=True)],
    }


def prune_list_json(plan: dict[str, Any]) -> str:
    """The prune list as JSON text (no NaN: missing numbers are ``null``)."""
    return json.dumps(plan, indent=1, allow_nan=False)
