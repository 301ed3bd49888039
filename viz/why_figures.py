"""Figures of "why here": the pairs matrix, each side's parts, the RoPE bands, what removing a
part does, and one pair over the prompt; and :func:`why_view`, everything a page shows for one
cell.

Matrices and bars show the strongest parts first and pool the rest as ``other``, so totals are
kept: the pooled matrix still adds up to the logit. Colours are on a scale centred at 0 (red
raises the logit, blue lowers it). Head parts carry their ``L.H`` as ``customdata`` so a page can
open the head in the explorer; token text comes from the prompt and is escaped here.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from models.circuits.why import WhySplit, part_head, part_words
from models.circuits.why_bands import BandSplit
from models.circuits.why_effects import PartEffect
from models.circuits.why_rows import PairMap
from viz.colours import NEGATIVE, POSITIVE, SIGNED, colour_bar
from viz.heatmap import position_ticks

DIVERGING = SIGNED
OTHER = "other"
TOP = 12
MARGIN = {"l": 10, "r": 10, "t": 50, "b": 10}
TOP_AXIS_MARGIN = 100  # px above a plot whose x axis is on top: title, axis name, tick labels


def _order(totals: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the ``top`` largest ``|totals|`` (largest first) and of the rest."""
    order = np.argsort(-np.abs(totals), kind="stable")
    return order[:top], order[top:]


def pooled(cell: WhySplit, top: int = TOP) -> tuple[np.ndarray, list[str], list[str]]:
    """The pairs matrix with the ``top`` strongest rows and columns first and the rest pooled
    into one ``other`` row and column: ``(matrix, row names, column names)``. The pooled matrix
    adds up to the same total."""
    rows, rest_rows = _order(cell.query_totals, top)
    cols, rest_cols = _order(cell.key_totals, top)
    pairs = cell.pairs
    blocks = [[pairs[np.ix_(rows, cols)], pairs[np.ix_(rows, rest_cols)].sum(1, keepdims=True)]]
    if rest_rows.size:
        blocks.append(
            [
                pairs[np.ix_(rest_rows, cols)].sum(0, keepdims=True),
                pairs[np.ix_(rest_rows, rest_cols)].sum(keepdims=True).reshape(1, 1),
            ]
        )
    matrix = np.block(blocks)
    row_names = [cell.query_parts[i] for i in rows] + ([OTHER] if rest_rows.size else [])
    col_names = [cell.key_parts[i] for i in cols] + ([OTHER] if rest_cols.size else [])
    if not rest_cols.size:
        matrix = matrix[:, : len(col_names)]
    return matrix, row_names, col_names


def _scale(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def _cell_title(cell: WhySplit, what: str) -> str:
    return html.escape(
        f"{what}: head {cell.head}, query {cell.query} {cell.query_token!r}, key {cell.key} "
        f"{cell.key_token!r}"
    )


def pairs_matrix(cell: WhySplit, top: int = TOP) -> go.Figure:
    """Query-side parts (rows) x key-side parts (columns), each cell a pair's share of the
    logit; the strongest rows and columns first, the rest pooled as ``other``."""
    matrix, rows, cols = pooled(cell, top)
    span = _scale(matrix)
    words = [
        [f"{part_words(c)} at the key × {part_words(r)} at the query" for c in cols] for r in rows
    ]
    fig = go.Figure(
        go.Heatmap(
            z=matrix,
            x=[html.escape(c) for c in cols],
            y=[html.escape(r) for r in rows],
            customdata=[[html.escape(w) for w in line] for line in words],
            colorscale=DIVERGING,
            zmin=-span,
            zmax=span,
            zmid=0.0,
            texttemplate="%{z:.2f}",
            colorbar=colour_bar("share of the logit"),
            hovertemplate="%{customdata}<br>%{z:.4f}<extra></extra>",
        )
    )
    fig.update_layout(  # the key axis sits on top: the title goes above its labels and name
        title={
            "text": _cell_title(cell, "Pairs"),
            "y": 1.0,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 8},
        },
        height=210 + 28 * len(rows),
        xaxis={"title": "key-side part", "type": "category", "side": "top"},
        yaxis={"title": "query-side part", "type": "category", "autorange": "reversed"},
        margin={**MARGIN, "t": TOP_AXIS_MARGIN},
    )
    return fig


def _bars(names: Sequence[str], values: np.ndarray, top: int, side: str) -> go.Bar:
    keep, rest = _order(values, top)
    labels = [names[i] for i in keep] + ([OTHER] if rest.size else [])
    shown = np.append(values[keep], values[rest].sum()) if rest.size else values[keep]
    heads = [str(part_head(name) or "") for name in labels]
    return go.Bar(
        x=shown,
        y=[html.escape(label) for label in labels],
        orientation="h",
        name=side,
        customdata=heads,
        marker_color=[POSITIVE if v >= 0 else NEGATIVE for v in shown],
        hovertext=[html.escape(part_words(label)) for label in labels],
        hovertemplate="%{hovertext}<br>%{x:.4f}<extra>" + side + "</extra>",
    )


def part_bars(cell: WhySplit, top: int = TOP) -> go.Figure:
    """Each side's parts and their totals (the pairs matrix's row and column sums), side by
    side; the rest of each side pooled as ``other``."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("at the query", "at the key"))
    fig.add_trace(_bars(cell.query_parts, cell.query_totals, top, "query"), row=1, col=1)
    fig.add_trace(_bars(cell.key_parts, cell.key_totals, top, "key"), row=1, col=2)
    fig.update_yaxes(type="category", autorange="reversed")
    fig.update_layout(
        title=_cell_title(cell, "Each side's parts"),
        height=140 + 24 * (top + 1),
        showlegend=False,
        margin=MARGIN,
    )
    return fig


def band_bars(bands: BandSplit) -> go.Figure:
    """Each RoPE band's share of the logit, fastest (shortest wavelength) first."""
    turns = [
        "never turns" if np.isinf(w) else "?" if np.isnan(w) else f"{w:.3g} tokens"
        for w in bands.wavelengths
    ]
    totals = bands.totals
    fig = go.Figure(
        go.Bar(
            x=[f"{label} ({turn})" for label, turn in zip(bands.labels, turns, strict=True)],
            y=totals,
            marker_color=["#1f77b4" if v >= 0 else "#d62728" for v in totals],
            hovertemplate="band %{x}<br>%{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=html.escape(f"By RoPE band: head {bands.head}, query {bands.query}, key {bands.key}"),
        height=360,
        xaxis={"title": "band (wavelength: tokens per turn)", "type": "category", "tickangle": -45},
        yaxis={"title": "share of the logit"},
        margin=MARGIN,
    )
    return fig


def effect_bars(effects: Sequence[PartEffect]) -> go.Figure:
    """For the top parts: the logit's change when each is removed, scales frozen (exactly its
    row or column sum) beside scales free (the model's own norms recompute)."""
    labels = [html.escape(f"{e.part} ({e.side})") for e in effects]
    fig = go.Figure(
        [
            go.Bar(name="scales frozen", x=labels, y=[e.frozen for e in effects]),
            go.Bar(
                name="scales free",
                x=labels,
                y=[np.nan if e.free is None else e.free for e in effects],
            ),
        ]
    )
    fig.update_layout(
        title="The logit's change with each part removed",
        barmode="group",
        height=360,
        xaxis={"title": "part (side it is removed from)", "type": "category"},
        yaxis={"title": "change of the logit"},
        margin=MARGIN,
    )
    return fig


def pair_map_figure(mapped: PairMap, tokens: Sequence[str], rows: range, cols: range) -> go.Figure:
    """One pair's share of the head's logits over a window of the pattern: ``mapped.values``
    holds queries ``rows`` by keys ``cols``, each axis labelled ``(i) token`` at its own
    positions (past 64 of them, five ticks by position number)."""

    def axis(positions: range) -> tuple[list[str], dict[str, list[str]]]:
        names = [html.escape(f"({i}) {tokens[i]}", quote=True) for i in positions]
        return names, {} if len(names) <= 64 else position_ticks(names, positions)

    (y, y_ticks), (x, x_ticks) = axis(rows), axis(cols)
    span = _scale(mapped.values)
    fig = go.Figure(
        go.Heatmap(
            z=mapped.values,
            x=x,
            y=y,
            colorscale=DIVERGING,
            zmin=-span,
            zmax=span,
            zmid=0.0,
            colorbar=colour_bar("share of the logit"),
            hovertemplate="query %{y}<br>key %{x}<br>%{z:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=html.escape(
            f"{part_words(mapped.key_part)} at the key × {part_words(mapped.query_part)} at "
            f"the query, head {mapped.head}"
        ),
        height=560,
        xaxis={"title": "key", "type": "category", **x_ticks},
        yaxis={"title": "query", "type": "category", "autorange": "reversed", **y_ticks},
        margin=MARGIN,
    )
    return fig


@dataclass(frozen=True)
class WhyView:
    """Everything a page shows for one cell.

    Attributes:
        summary: lines in words: the score, the pairs' sum beside it and the difference, the
            soft-cap step where there is one, the weight.
        top_pairs: the strongest pairs in words.
        heads: the heads among the shown parts, for links to the explorer.
        pairs, parts: the pairs matrix and each side's bars.
        bands: the RoPE band bars, ``None`` without bands.
    """

    summary: tuple[str, ...]
    top_pairs: tuple[str, ...]
    heads: tuple[str, ...]
    pairs: go.Figure
    parts: go.Figure
    bands: go.Figure | None


def summary(cell: WhySplit) -> tuple[str, ...]:
    """The score and the weight, and how exactly the pairs rebuild the score."""
    lines = [
        f"Score (before the softmax): {cell.score:+.4f}",
        f"Sum of the pairs: {cell.total:+.4f} (difference {cell.difference:.1e}, against a row "
        f"whose largest logit is {cell.row_scale:.3g})",
    ]
    if cell.softcap is not None:
        lines.append(
            f"Soft-cap {cell.softcap:g}·tanh(s/{cell.softcap:g}): {cell.score:+.4f} → "
            f"{cell.capped(cell.score):+.4f} (the pairs split the logit before the cap)"
        )
    lines.append(f"Weight on this key: {cell.weight:.4f}")
    return tuple(lines)


def why_view(cell: WhySplit, bands: BandSplit | None = None, top: int = TOP) -> WhyView:
    """The figures and words of one cell's split."""
    _, rows, cols = pooled(cell, top)
    heads = sorted({str(h) for h in map(part_head, rows + cols) if h is not None})
    return WhyView(
        summary=summary(cell),
        top_pairs=tuple(pair.words() for pair in cell.top_pairs(5)),
        heads=tuple(heads),
        pairs=pairs_matrix(cell, top),
        parts=part_bars(cell, top),
        bands=None if bands is None else band_bars(bands),
    )
