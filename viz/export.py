"""Downloads: patterns as CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import numpy as np

from models.model.variants.sinks import SINK_KEY, SINK_LABEL

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """Prefix text a spreadsheet would run as a formula with an apostrophe."""
    return "'" + text if text.startswith(FORMULA_START) else text


def pattern_csv(
    pattern: np.ndarray,
    tokens: Sequence[str],
    rows: Sequence[int] | None = None,
    cols: Sequence[int] | None = None,
) -> str:
    """A ``query_pos key_pos`` pattern (or a window of one) as CSV: a row per query, a column
    per key.

    The first column and the header carry ``(i) token`` labels; ``rows`` and ``cols`` give the
    absolute positions a window holds (by default it starts at 0); a column at ``SINK_KEY``
    is a head's learned sink, headed "sink". NaN cells (keys the query cannot see: see
    :func:`viz.heatmap.masked`) are written empty, not as a weight of 0.
    """
    rows = range(pattern.shape[0]) if rows is None else rows
    cols = range(pattern.shape[1]) if cols is None else cols
    label = [spreadsheet_safe(f"({i}) {tok}") for i, tok in enumerate(tokens)]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["query \\ key"] + [SINK_LABEL if c == SINK_KEY else label[c] for c in cols])
    for r, row in zip(rows, pattern, strict=True):
        writer.writerow([label[r]] + ["" if np.isnan(w) else f"{w:.6g}" for w in row])
    return buf.getvalue()
