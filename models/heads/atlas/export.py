"""The atlas on disk: CSV tables for spreadsheets, JSON documents for other viewers.

``write_atlas(atlas, DIR)`` writes

- ``atlas.csv``: one row per head: ``L.H``, layer, head, the flags, and for every quantity its
  value, ``_se`` (standard error; empty where the source has none) and ``_rank`` (1 = largest;
  empty where not ranked), then ``not_applicable`` (the quantities that do not apply);
- ``samples.csv``: each head's texts sampled across the deciles of its activation;
- ``components.csv``: each head's principal components per space and the tokens at either end;
- ``atlas.json``: the model, the corpus (with every text's tokens), the quantities' words, units
  and uncertainty rules, and every head's values, standard errors, ranks and flags
  (``schemas/atlas.schema.json``);
- ``cards/L{layer}H{head}.json``: each head's card (``schemas/card.schema.json``).

The JSON documents follow the two JSON Schemas in ``schemas/``, which are the format's
reference; numbers that are missing (not measured, no standard error) are ``null``. Token text
in the CSV files is guarded against spreadsheet formulas.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models.head import Head, all_heads
from models.heads.atlas.card import HeadCard, SampledText, TokenLoad, head_card
from models.heads.atlas.compute import Atlas
from models.heads.atlas.metrics import METRIC_NAMES, METRICS, UNCERTAINTY, not_applicable
from models.heads.names import COLUMN_LABELS
from models.heads.table import FLOAT_FORMAT, spreadsheet_safe

FORMAT = "attention-atlas"
VERSION = 1
SCHEMAS = Path(__file__).resolve().parent / "schemas"
CONTEXT = 8  # tokens kept on either side of a sample's peak
POSITIONS = ("layer", "head_index")


def _number(value: Any) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


def _heads(atlas: Atlas) -> list[Head]:
    return list(all_heads(atlas.facts.n_layers, atlas.facts.n_heads))


def atlas_table(atlas: Atlas) -> pd.DataFrame:
    """One row per head (see the module docstring)."""
    heads = _heads(atlas)
    data: dict[str, Any] = {
        "L.H": [str(h) for h in heads],
        "layer": [h.layer for h in heads],
        "head": [h.index for h in heads],
        "flags": [
            ", ".join(COLUMN_LABELS[n] for n, grid in atlas.flags.items() if grid[h]) for h in heads
        ],
    }
    for name in METRIC_NAMES:
        if name in POSITIONS:
            continue
        measure = atlas.measures[name]
        ranks = measure.ranks().ravel()
        data[name] = np.where(measure.applies, measure.values, np.nan).ravel()
        data[f"{name}_se"] = (
            np.full(len(heads), np.nan) if measure.se is None else measure.se.ravel()
        )
        data[f"{name}_rank"] = pd.array([int(r) if r > 0 else None for r in ranks], dtype="Int64")
    data["not_applicable"] = [
        " ".join(n for n in METRIC_NAMES if not_applicable(n, atlas.layers[h.layer])) for h in heads
    ]
    return pd.DataFrame(data)


def _csv(table: pd.DataFrame, text_columns: Iterable[str] = ()) -> str:
    out = table.copy()
    for column in text_columns:
        out[column] = [spreadsheet_safe(str(t)) for t in out[column]]
    text: str = out.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    return text


def samples_table(atlas: Atlas, cards: Iterable[HeadCard]) -> pd.DataFrame:
    """One row per sampled text of each head: decile, text, activation, peak and its tokens."""
    rows = [
        {
            "L.H": str(card.head),
            "decile": s.decile + 1,
            "text": s.text,
            "activation": s.activation,
            "query": s.query,
            "key": s.key,
            "query_token": atlas.tokens[s.text][s.query],
            "key_token": atlas.tokens[s.text][s.key],
        }
        for card in cards
        for s in card.samples
    ]
    return pd.DataFrame(rows)


def components_table(cards: Iterable[HeadCard]) -> pd.DataFrame:
    """One row per token at either end of each component of each space of each head."""
    rows = [
        {
            "L.H": str(card.head),
            "space": view.space,
            "shared_head": view.owner,
            "component": comp.index + 1,
            "share": comp.share,
            "end": end,
            "rank": rank + 1,
            "text": load.text,
            "position": load.position,
            "token": load.token,
            "loading": load.loading,
        }
        for card in cards
        for view in card.lowrank
        for comp in view.components
        for end, loads in (("positive", comp.positive), ("negative", comp.negative))
        for rank, load in enumerate(loads)
    ]
    return pd.DataFrame(rows)


def components_csv(cards: Iterable[HeadCard]) -> str:
    """:func:`components_table` as CSV text, token cells guarded against formulas."""
    return _csv(components_table(cards), ("token",))


def _model(atlas: Atlas) -> dict[str, Any]:
    f = atlas.facts
    return {
        "name": f.name,
        "architecture": f.architecture,
        "n_layers": f.n_layers,
        "n_heads": f.n_heads,
        "n_kv_heads": f.n_kv_heads,
        "d_head": f.d_head,
        "causal": f.causal,
        "positional": f.positional,
    }


def atlas_json(atlas: Atlas) -> dict[str, Any]:
    """The atlas document (``schemas/atlas.schema.json``)."""
    ranks = {name: atlas.measures[name].ranks() for name in METRIC_NAMES}

    def head_entry(head: Head) -> dict[str, Any]:
        layer = atlas.layers[head.layer]
        measures = {n: atlas.measures[n] for n in METRIC_NAMES}
        return {
            "head": str(head),
            "layer": head.layer,
            "index": head.index,
            "flags": [name for name, grid in atlas.flags.items() if grid[head]],
            "values": {
                n: _number(m.values[head]) if m.applies[head] else None for n, m in measures.items()
            },
            "se": {n: None if m.se is None else _number(m.se[head]) for n, m in measures.items()},
            "rank": {n: int(ranks[n][head]) or None for n in METRIC_NAMES},
            "not_applicable": {
                n: reason for n in METRIC_NAMES if (reason := not_applicable(n, layer))
            },
        }

    return {
        "format": f"{FORMAT}/head-atlas",
        "version": VERSION,
        "model": _model(atlas),
        "corpus": {
            "name": atlas.corpus,
            "key": atlas.corpus_key,
            "source": atlas.source,
            "texts": [list(tokens) for tokens in atlas.tokens],
        },
        "thresholds": vars(atlas.thresholds),
        "notes": list(atlas.notes),
        "metrics": [
            {
                "name": name,
                "label": info.label,
                "unit": info.unit,
                "source": info.source,
                "uncertainty": UNCERTAINTY[info.source],
                "help": info.help,
                "twin": info.twin,
            }
            for name, info in METRICS.items()
        ],
        "heads": [head_entry(head) for head in _heads(atlas)],
    }


def card_json(atlas: Atlas, card: HeadCard) -> dict[str, Any]:
    """A head card document (``schemas/card.schema.json``)."""

    def sample(s: SampledText) -> dict[str, Any]:
        tokens = atlas.tokens[s.text]
        start = max(0, min(s.key, s.query) - CONTEXT)
        stop = min(len(tokens), max(s.key, s.query) + CONTEXT + 1)
        return {
            "decile": s.decile + 1,
            "text": s.text,
            "activation": _number(s.activation),
            "query": s.query,
            "key": s.key,
            "context_start": start,
            "context": list(tokens[start:stop]),
            "row": [{"key": k, "weight": w} for k, w in s.row],
        }

    def loads(items: Iterable[TokenLoad]) -> list[dict[str, Any]]:
        return [
            {"text": x.text, "position": x.position, "token": x.token, "loading": x.loading}
            for x in items
        ]

    return {
        "format": f"{FORMAT}/head-card",
        "version": VERSION,
        "model": atlas.facts.name,
        "corpus_key": atlas.corpus_key,
        "head": str(card.head),
        "layer": card.head.layer,
        "index": card.head.index,
        "flags": list(card.flags),
        "metrics": [
            {
                "name": m.name,
                "label": m.label,
                "unit": m.unit,
                "value": m.value,
                "se": m.se,
                "rank": m.rank,
                "of": m.of,
                "status": m.status,
                "note": m.note,
            }
            for m in card.metrics
        ],
        "twins": [{"weight": w, "data": d} for w, d in card.twins],
        "samples": [sample(s) for s in card.samples],
        "lowrank": [
            {
                "space": v.space,
                "shared_head": v.owner,
                "n_tokens": v.n_tokens,
                "components": [
                    {
                        "index": c.index + 1,
                        "share": _number(c.share),
                        "positive": loads(c.positive),
                        "negative": loads(c.negative),
                    }
                    for c in v.components
                ],
            }
            for v in card.lowrank
        ],
    }


def card_name(head: Head) -> str:
    return f"L{head.layer}H{head.index}.json"


def _dump(document: dict[str, Any]) -> str:
    return json.dumps(document, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def atlas_files(atlas: Atlas) -> dict[str, str]:
    """Every file of the module docstring: relative path -> text."""
    cards = [head_card(atlas, head) for head in _heads(atlas)]
    return {
        "atlas.csv": _csv(atlas_table(atlas)),
        "samples.csv": _csv(samples_table(atlas, cards), ("query_token", "key_token")),
        "components.csv": components_csv(cards),
        "atlas.json": _dump(atlas_json(atlas)),
        **{f"cards/{card_name(c.head)}": _dump(card_json(atlas, c)) for c in cards},
    }


def atlas_zip(atlas: Atlas) -> bytes:
    """:func:`atlas_files` as one zip archive (for a download)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in atlas_files(atlas).items():
            archive.writestr(name, text)
    return buffer.getvalue()


def write_atlas(atlas: Atlas, directory: Path) -> list[Path]:
    """Write every file of the module docstring into ``directory`` (made if missing); return
    the paths written."""
    directory = Path(directory)
    (directory / "cards").mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in atlas_files(atlas).items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
