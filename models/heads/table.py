"""The per-head table shared by the page and the command line, its CSV and the prune list."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import pandas as pd

from models.heads.ablation import AblationMethod, Head, Importance, Ranking
from models.heads.corpus_ablation import CorpusImportance
from models.heads.corpus_scores import CorpusScores
from models.heads.induction import RepeatedScores
from models.heads.names import (ABLATION_COLUMNS, COLUMN_LABELS, CORE_COLUMNS, CORPUS_ABLATION,
                                EXTRA_COLUMNS, RANKING_COLUMN, SCORE_COLUMNS)
from models.heads.scores import DEFAULT_SINK_EPS, PromptScores, flag
from models.heads.spread import Spread, spread

FlagSource = Literal["prompt", "repeated"]
FLOAT_FORMAT = "%.8g"
__all__ = ["ABLATION_COLUMNS", "CORE_COLUMNS", "EXTRA_COLUMNS", "RANKING_COLUMN", "SCORE_COLUMNS",
           "Thresholds", "corpus_flag_grids", "corpus_prune_list", "corpus_table", "flag_grids",
           "head_table", "prune_list", "prune_list_json", "table_csv"]


@dataclass(frozen=True)
class Thresholds:
    """A head is flagged for a score strictly above its threshold (``sink`` is eps)."""

    induction: float = 0.4
    previous_token: float = 0.4
    duplicate_token: float = 0.3
    current_token: float = 0.3
    sink: float = DEFAULT_SINK_EPS


def _grid(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).ravel()


def flag_grids(repeated: RepeatedScores, prompt: PromptScores, thresholds: Thresholds,
               source: FlagSource = "prompt") -> dict[str, np.ndarray]:
    """``layer head_index`` boolean flags per score.

    Induction is always judged on the repeated tokens and sinks on the prompt; ``source`` picks
    where the previous-, duplicate- and current-token scores are judged.
    """
    other = prompt if source == "prompt" else repeated
    return {
        "induction": flag(repeated.induction, thresholds.induction),
        "previous_token": flag(other.previous_token, thresholds.previous_token),
        "duplicate_token": flag(other.duplicate_token, thresholds.duplicate_token),
        "current_token": flag(other.current_token, thresholds.current_token),
        "sink": flag(prompt.sink, thresholds.sink),
    }


def _flag_names(flags: dict[str, np.ndarray]) -> list[str]:
    names = np.array(list(flags))
    stacked = np.stack([_grid(f).astype(bool) for f in flags.values()], axis=-1)
    return [", ".join(names[row]) for row in stacked]


def head_table(repeated: RepeatedScores, prompt: PromptScores,
               thresholds: Thresholds = Thresholds(), importance: Importance | None = None,
               tokens: Sequence[str] | None = None, extras: bool = False,
               source: FlagSource = "prompt") -> pd.DataFrame:
    """One row per head: ``layer, head``, every score, the sink flag, optionally more.

    Args:
        repeated: scores on repeated random tokens (``induction`` comes from here).
        prompt: scores on the user's text (previous/duplicate/current-token and ``sink``).
        thresholds: flag thresholds; ``sink_flag`` is ``sink > thresholds.sink``.
        importance: pruning measurements to add as the three ablation columns.
        tokens: prompt token labels, to name each head's strongest sink.
        extras: add ``L.H``, the flag list, the repeated-token scores and the top sink.
        source: where the previous/duplicate/current-token flags are judged.
    """
    n_layers, n_heads = repeated.induction.shape
    layers, heads = np.divmod(np.arange(n_layers * n_heads), n_heads)
    data: dict[str, object] = {"layer": layers, "head": heads,
                               "induction": _grid(repeated.induction)}
    for name in SCORE_COLUMNS[1:]:
        data[name] = _grid(getattr(prompt, name))
    data["sink_flag"] = _grid(flag(prompt.sink, thresholds.sink)).astype(bool)
    if importance is not None:
        data["zero_ablation_dloss"] = _grid(importance.zero)
        data["mean_ablation_dloss"] = _grid(importance.mean)
        data["grad_importance"] = _grid(importance.gradient)
    if extras:
        data["L.H"] = [f"{l}.{h}" for l, h in zip(layers, heads)]
        data["flags"] = _flag_names(flag_grids(repeated, prompt, thresholds, source))
        for name in ("previous_token", "duplicate_token", "current_token"):
            data[f"{name}_repeated"] = _grid(getattr(repeated, name))
        positions = prompt.top_sink_pos.ravel()
        data["top_sink_pos"] = positions
        data["top_sink_token"] = [tokens[p] if tokens else "" for p in positions]
        data["top_sink_alpha"] = _grid(prompt.top_sink_alpha)
    return pd.DataFrame(data)


def table_csv(table: pd.DataFrame) -> str:
    """CSV text of a head table; token text is guarded against spreadsheet formulas."""
    from viz.export import spreadsheet_safe

    out = table.copy()
    if "top_sink_token" in out:
        out["top_sink_token"] = [spreadsheet_safe(str(t)) for t in out["top_sink_token"]]
    return out.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")


def _number(value: float) -> float | None:
    """A JSON-safe float: NaN and infinities become ``null``."""
    value = float(value)
    return value if np.isfinite(value) else None


def prune_list(importance: Importance, ranking: Ranking, method: AblationMethod,
               order: Sequence[Head], losses: Sequence[float], model_name: str,
               reference: str) -> dict:
    """The prune list: heads from least to most important with the loss measured at each k.

    ``steps[k - 1]`` removes head ``k`` in the order and reports the loss with the first ``k``
    heads ablated together; ``clean_loss`` is ``k = 0``.
    """
    values = importance.ranking(ranking)
    return {
        "model": model_name,
        "reference_text": reference,
        "loss": "next-token cross-entropy" if importance.kind == "next_token"
        else "masked-token cross-entropy",
        "scored_tokens": importance.n_targets,
        "ranked_by": RANKING_COLUMN[ranking],
        "ablation": method,
        "clean_loss": _number(losses[0]),
        "steps": [{"k": k + 1, "head": f"{layer}.{head}", "layer": layer, "head_index": head,
                   "importance": _number(values[layer, head]), "loss": _number(losses[k + 1]),
                   "dloss": _number(losses[k + 1] - losses[0])}
                  for k, (layer, head) in enumerate(order)],
    }


def prune_list_json(plan: dict) -> str:
    return json.dumps(plan, indent=1, allow_nan=False)


# --- corpus level -------------------------------------------------------------------------------

FLAG_SCORES = ("induction", "previous_token", "duplicate_token", "current_token", "sink")


def repeated_spread(repeated: RepeatedScores) -> Spread:
    """The induction score as a spread over the random sequences."""
    per = repeated.induction_per_sequence
    return spread(per if per is not None else repeated.induction[None])


def corpus_flag_grids(repeated: RepeatedScores, scores: CorpusScores, thresholds: Thresholds
                      ) -> dict[str, np.ndarray]:
    """``layer head_index`` flags: a score's lower bound (mean - 2 SE) above its threshold.

    Induction is judged over the repeated random sequences, the other scores over the texts.
    """
    bounds = {"induction": repeated_spread(repeated).lower_bound,
              **{name: scores.spreads[name].lower_bound for name in FLAG_SCORES[1:]}}
    return {name: flag(bounds[name], getattr(thresholds, name)) for name in FLAG_SCORES}


def _spread_columns(data: dict, name: str, values: Spread) -> None:
    data[name] = _grid(values.mean)
    for part in ("se", "min", "max", "lower"):
        source = {"se": values.se, "min": values.low, "max": values.high,
                  "lower": values.lower_bound}[part]
        data[f"{name}_{part}"] = _grid(source)


def spread_text(mean: float, se: float, low: float, high: float, digits: int = 3) -> str:
    """``± 0.012 · 0.10–0.55`` (or ``one text``), for a column shown beside the mean."""
    if np.isnan(mean):
        return ""
    if np.isnan(se):
        return "one text"
    return f"± {se:.{digits}f} · {low:.{digits - 1}f}–{high:.{digits - 1}f}"


def corpus_table(repeated: RepeatedScores, scores: CorpusScores, thresholds: Thresholds,
                 importance: CorpusImportance | None = None) -> pd.DataFrame:
    """One row per head: every score's mean over the corpus with its standard error, range and
    lower bound, the flags, the repeated-token scores and, if given, the ablation columns."""
    n_layers, n_heads = repeated.induction.shape
    layers, heads = np.divmod(np.arange(n_layers * n_heads), n_heads)
    flags = corpus_flag_grids(repeated, scores, thresholds)
    names = np.array([COLUMN_LABELS[name] for name in flags])
    stacked = np.stack([_grid(f).astype(bool) for f in flags.values()], axis=-1)
    data: dict[str, object] = {"L.H": [f"{l}.{h}" for l, h in zip(layers, heads)],
                               "layer": layers, "head": heads,
                               "flags": [", ".join(names[row]) for row in stacked]}
    spreads = {"induction": repeated_spread(repeated), **scores.spreads}
    if importance is not None:
        spreads.update({CORPUS_ABLATION[k]: v for k, v in importance.spreads.items()})
    for name, values in spreads.items():
        _spread_columns(data, name, values)
        digits = 4 if name in CORPUS_ABLATION.values() else 3
        data[f"{name}_spread"] = [spread_text(*row, digits=digits) for row in zip(
            _grid(values.mean), _grid(values.se), _grid(values.low), _grid(values.high))]
    data["sink_flag"] = _grid(flags["sink"]).astype(bool)
    for name in ("previous_token", "duplicate_token", "current_token"):
        data[f"{name}_repeated"] = _grid(getattr(repeated, name))
    return pd.DataFrame(data)


def corpus_prune_list(importance: CorpusImportance, ranking: str, method: AblationMethod,
                      order: Sequence[Head], ks: Sequence[int], losses: Sequence[float],
                      model_name: str, corpus: str) -> dict:
    """The prune list over a corpus: heads from least to most important, and the measured
    corpus loss at each ``k`` of the curve."""
    values = importance.ranking(ranking)
    spread_ = importance.spreads[ranking]
    return {
        "model": model_name, "corpus": corpus, "texts": importance.n_texts,
        "loss": "mean over texts of next-token cross-entropy" if importance.kind == "next_token"
        else "mean over texts of masked-token cross-entropy",
        "scored_tokens": importance.n_targets, "ranked_by": CORPUS_ABLATION[ranking],
        "ablation": method, "clean_loss": _number(importance.base_loss),
        "order": [{"rank": i + 1, "head": f"{l}.{h}", "layer": l, "head_index": h,
                   "importance": _number(values[l, h]), "standard_error": _number(spread_.se[l, h])}
                  for i, (l, h) in enumerate(order)],
        "curve": [{"k": int(k), "loss": _number(loss)} for k, loss in zip(ks, losses)],
    }
