"""Downloads: patterns as CSV."""

from __future__ import annotations

import csv
import io
from typing import Sequence

import numpy as np

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """Prefix text a spreadsheet would run as a formula with an apostrophe."""
    return "'" + text if text.startswith(FORMULA_START) else text


def pattern_csv(pattern: np.ndarray, tokens: Sequence[str]) -> str:
    """A ``query_pos key_pos`` pattern as CSV: one row per query, one column per key.

    The first column and the header carry ``(i) token`` labels.
    """
    labels = [spreadsheet_safe(f"({i}) {tok}") for i, tok in enumerate(tokens)]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["query \\ key"] + labels[: pattern.shape[1]])
    for label, row in zip(labels, pattern):
        writer.writerow([label] + [f"{w:.6g}" for w in row])
    return buf.getvalue()
