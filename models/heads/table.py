"""The per-head table shared by the page and the command line, its CSV and the prune list."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import pandas as pd

from models.heads.ablation import AblationMethod, Head, Importance, Ranking
from models.heads.induction import RepeatedScores
from models.heads.names import (ABLATION_COLUMNS, CORE_COLUMNS, EXTRA_COLUMNS, RANKING_COLUMN,
                                SCORE_COLUMNS)
from models.heads.scores import DEFAULT_SINK_EPS, PromptScores, flag

FlagSource = Literal["prompt", "repeated"]
FLOAT_FORMAT = "%.8g"
__all__ = ["ABLATION_COLUMNS", "CORE_COLUMNS", "EXTRA_COLUMNS", "RANKING_COLUMN", "SCORE_COLUMNS",
           "Thresholds", "flag_grids", "head_table", "prune_list", "prune_list_json", "table_csv"]


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
