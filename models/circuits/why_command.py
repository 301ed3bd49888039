"""What ``python -m models.circuits why`` computes, and its CSV table.

One row per (query part, key part) pair: ``query_part,key_part,score`` (``query_part,key_part,
band,score`` with ``--bands``), part names as the app writes them (``embed``, ``L.H``,
``mlp.L``, ...; ALiBi's part is the row ``alibi,alibi``). Scores are written with 9
significant digits, so the column adds up to the cell's logit as closely as the split does.
Every cell is a part name, a band number or a number: nothing a spreadsheet would run.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from models.circuits.task import TaskError
from models.circuits.why import WhySplit, split
from models.circuits.why_bands import BandSplit, band_split
from models.circuits.why_keep import WhyUnavailable, keep, keep_cost
from models.cli import Say
from models.head import Head
from models.model.forward import tokenize
from models.model.loading import load
from models.model.spec import ModelSpec

COLUMNS = ["query_part", "key_part", "score"]
BAND_COLUMNS = ["query_part", "key_part", "band", "score"]
FLOAT_FORMAT = "%.9g"


def why_table(cell: WhySplit, bands: BandSplit | None = None) -> pd.DataFrame:
    """The pairs of ``cell`` as rows (with ``bands``: one row per pair and band)."""
    if bands is None:
        rows = cell.rows()
        return pd.DataFrame(
            {
                "query_part": [pair.query_part for pair in rows],
                "key_part": [pair.key_part for pair in rows],
                "score": [pair.value for pair in rows],
            },
            columns=COLUMNS,
        )
    n_query, n_key, n_bands = bands.pairs.shape
    return pd.DataFrame(
        {
            "query_part": np.repeat(bands.query_parts, n_key * n_bands),
            "key_part": np.tile(np.repeat(bands.key_parts, n_bands), n_query),
            "band": np.tile(bands.labels, n_query * n_key),
            "score": bands.pairs.ravel(),
        },
        columns=BAND_COLUMNS,
    )


def table_csv(table: pd.DataFrame) -> str:
    """CSV text of a ``why`` table."""
    text: str = table.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    return text


def describe(cell: WhySplit) -> list[str]:
    """The cell's score and weight, the parts' sum beside the score, and the top pairs."""
    lines = [
        f"head {cell.head}, query {cell.query} {cell.query_token!r}, key {cell.key} "
        f"{cell.key_token!r}",
        f"score {cell.score:.6g} (the model's logit before the softmax)",
        f"sum of the pairs {cell.total:.6g} (difference {cell.difference:.2g}; the row's "
        f"largest logit {cell.row_scale:.3g})",
    ]
    if cell.softcap is not None:
        lines.append(
            f"soft-cap {cell.softcap:g}: {cell.score:.6g} -> {cell.capped(cell.score):.6g}"
        )
    lines.append(f"weight {cell.weight:.6g}")
    lines += [f"  {pair.words()}" for pair in cell.top_pairs(5)]
    return lines


def run_why(args: argparse.Namespace, say: Say) -> tuple[WhySplit, pd.DataFrame]:
    """Load, keep the head's parts (one pass), split the cell and return the table."""
    model = load(
        ModelSpec(name=args.model, device=args.device, dtype=args.dtype),
        progress=lambda _f, text: say(text),
    )
    head = Head.parse(args.head)
    facts = model.facts
    if not head.fits(facts.n_layers, facts.n_heads):
        raise TaskError(
            f"{head} is not a head of {facts.name} ({facts.n_layers} layers x "
            f"{facts.n_heads} heads)."
        )
    if args.bands and facts.positional != "rotary":
        raise WhyUnavailable(
            f"{facts.name} does not rotate queries and keys (no RoPE): its scores have no "
            "frequency bands."
        )
    ids, _ = tokenize(model, args.prompt)
    cost = keep_cost(model, ids.shape[1], head.layer)
    say(f"{ids.shape[1]} tokens; keeping the parts: {cost.describe()}")
    kept = keep(model, ids, head, progress=lambda f, text: say(f"{100 * f:3.0f}% {text}"))
    cell = split(kept, args.query, args.key)
    bands = None
    if args.bands:
        bands = band_split(kept, args.query, args.key)
        for label, turn in zip(bands.labels, bands.wavelengths, strict=True):
            say(f"band {label}: {turn:.4g} tokens per turn")
    return cell, why_table(cell, bands)
