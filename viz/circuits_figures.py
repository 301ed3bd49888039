"""Figures of the circuits page: per-head grids on a scale centred at 0, per-position patch
effects, the parts of the logit difference, attribution patching against exact patching, and
weight scores (alone and against their data-based twins). The circuit graph is
:mod:`viz.circuit_graph`.

Token text comes from the prompt, so it is escaped before plotly sees it. Per-head points carry
their ``L.H`` as ``customdata`` so that a page can open the head in the explorer.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from viz.colours import SEQUENTIAL, SIGNED, colour_bar

if TYPE_CHECKING:
    from models.circuits.agreement import Agreement
    from models.circuits.weight_circuits import Correlation

DIVERGING = SIGNED
DIFFERS = "#d62728"  # positions where the clean and corrupted prompts differ
GROUP_COLOURS = {
    "embeddings": "#7f7f7f",
    "heads": "#1f77b4",
    "MLPs": "#ff7f0e",
    "biases": "#2ca02c",
}
MAX_CELL_TEXT = 64


def symmetric_range(values: np.ndarray, floor: float = 0.0) -> float:
    """Half-width of a colour scale centred at 0 that holds every finite value."""
    finite = np.abs(np.asarray(values, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    return float(max(finite.max() if finite.size else 0.0, floor)) or 1.0


def head_grid(
    values: np.ndarray,
    *,
    title: str,
    value_name: str,
    floor: float = 0.0,
    columns: Sequence[str] | None = None,
    column_title: str = "head",
    signed: bool = True,
) -> go.Figure:
    """A ``layer head_index`` grid on a diverging scale centred at 0 (``signed``), or, for
    values that cannot be negative, on a sequential scale from 0.

    Args:
        values: one number per head.
        title: figure title (escaped here).
        value_name: what the number is, for the hover and the colour bar.
        floor: the scale reaches at least ``±floor`` (e.g. 1 for patch effects).
        columns: labels of the columns (default the head index; e.g. key/value heads with
            the query heads that share them), escaped here.
        column_title: what the columns are.
        signed: the values can take either sign (:data:`viz.colours.SIGNED`, red positive);
            False: they cannot be negative (:data:`viz.colours.SEQUENTIAL` from 0).
    """
    n_layers, n_heads = values.shape
    top = symmetric_range(values, floor)
    text = n_layers * n_heads <= MAX_CELL_TEXT
    labels = [str(h) for h in range(n_heads)] if columns is None else list(columns)
    where = "head %{y}.%{x}" if columns is None else "layer %{y}, %{x}"
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=[html.escape(label) for label in labels],
            y=[str(layer) for layer in range(n_layers)],
            colorscale=DIVERGING if signed else SEQUENTIAL,
            zmin=-top if signed else 0.0,
            zmax=top,
            zmid=0.0 if signed else None,
            texttemplate="%{z:.2f}" if text else None,
            colorbar=colour_bar(html.escape(value_name)),
            hovertemplate=f"{where}<br>{html.escape(value_name)} %{{z:.4f}}<extra></extra>",
        )
    )
    fig.update_layout(
        title=html.escape(title),
        height=140 + 30 * n_layers,
        xaxis={"title": html.escape(column_title), "type": "category"},
        yaxis={"title": "layer", "autorange": "reversed", "type": "category"},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig


def position_bars(
    effects: np.ndarray, tokens: Sequence[str], *, title: str, differs: Sequence[bool] | None = None
) -> go.Figure:
    """Patch effect of one head at each position, labelled ``(i) token``.

    Args:
        effects: ``pos`` patch effects.
        tokens: readable labels of the clean prompt.
        title: figure title (escaped here).
        differs: positions where the clean and corrupted tokens differ: their bars are red and
            their column is shaded, so a position that differs shows even when its bar is 0.
    """
    labels = [html.escape(f"({i}) {tok}", quote=True) for i, tok in enumerate(tokens)]
    colours = [
        DIFFERS if differs is not None and differs[i] else "#1f77b4" for i in range(len(labels))
    ]
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=np.asarray(effects, dtype=np.float64),
            marker_color=colours,
            hovertemplate="%{x}<br>patch effect %{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=html.escape(title),
        height=360,
        xaxis={
            "title": "position patched (shaded red: the prompts differ there)",
            "type": "category",
            "tickangle": -60,
        },
        yaxis={"title": "patch effect"},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    for i, differ in enumerate(differs or ()):
        if differ:
            fig.add_vrect(
                x0=i - 0.5, x1=i + 0.5, fillcolor=DIFFERS, opacity=0.12, line_width=0, layer="below"
            )
    return fig


def parts_bars(parts: Sequence[tuple[str, str, float]], *, title: str) -> go.Figure:
    """Horizontal bars of the logit difference's parts, coloured by group. Each bar is a part's
    contribution in logits (the parts add up to LD, as the hover says), not a share of LD.

    Args:
        parts: ``(group, part, value)`` rows in residual-stream order.
        title: figure title (escaped here).
    """
    fig = go.Figure()
    for group, colour in GROUP_COLOURS.items():
        rows = [(name, value) for g, name, value in parts if g == group]
        if rows:
            fig.add_trace(
                go.Bar(
                    y=[html.escape(name) for name, _ in rows],
                    x=[value for _, value in rows],
                    orientation="h",
                    name=group,
                    marker_color=colour,
                    hovertemplate="%{y}<br>%{x:.4f} logits of LD (the parts add up to LD)"
                    "<extra></extra>",
                )
            )
    order = [html.escape(name) for _, name, _ in parts]
    fig.update_layout(
        title={"text": html.escape(title), "y": 0.98, "yanchor": "top"},
        height=max(360, 130 + 18 * len(parts)),
        # short: in a narrow column a long title outgrew the plot it is centred on
        xaxis={"title": "logits of LD", "zeroline": True, "automargin": True},
        yaxis={  # the margin grows to the longest part's name, so none is cut at the left
            "categoryorder": "array",
            "categoryarray": order,
            "autorange": "reversed",
            "automargin": True,
        },
        barmode="overlay",
        margin={"l": 10, "r": 10, "t": 95, "b": 10},
        # over the plot, under the title: beside it, the legend left a narrow column too little
        # room for the names, which plotly then cut at the left; under it, it met the axis title
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.01, "x": 0},
    )
    return fig


# --- attribution patching, the circuit graph and the weights ---------------------------------


def head_labels(n_layers: int, n_heads: int) -> list[str]:
    return [f"{layer}.{head}" for layer in range(n_layers) for head in range(n_heads)]


def _diagonal(fig: go.Figure, values: Sequence[np.ndarray]) -> None:
    finite = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in values])
    finite = finite[np.isfinite(finite)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    fig.add_trace(
        go.Scatter(
            x=[low, high],
            y=[low, high],
            mode="lines",
            name="y = x",
            line={"color": "#999999", "dash": "dash"},
            hoverinfo="skip",
        )
    )


def atp_scatter(
    estimate: np.ndarray,
    exact: np.ndarray,
    agreement: Agreement,
    *,
    title: str,
    estimate_name: str = "AtP*",
) -> go.Figure:
    """Estimated against exact patch effect, one point per head (customdata ``L.H``).

    Args:
        estimate, exact: ``layer head_index`` effects.
        agreement: a :class:`models.circuits.agreement.Agreement` of the two; its numbers go
            in the title and its worst heads are labelled (``saturated`` ones marked so).
        title: figure title (escaped here).
        estimate_name: what the estimate is called on the axis.
    """
    n_layers, n_heads = exact.shape
    labels = head_labels(n_layers, n_heads)
    fig = go.Figure(
        go.Scatter(
            x=np.asarray(exact, dtype=np.float64).ravel(),
            y=np.asarray(estimate, dtype=np.float64).ravel(),
            mode="markers",
            name="heads",
            customdata=labels,
            marker={"color": "#1f77b4", "size": 7},
            hovertemplate=(
                f"head %{{customdata}}<br>exact %{{x:.4f}}<br>"
                f"{html.escape(estimate_name)} %{{y:.4f}}<extra></extra>"
            ),
        )
    )
    _diagonal(fig, [estimate, exact])
    for worst in agreement.worst:
        note = " (saturated)" if worst.saturated else ""
        fig.add_annotation(
            x=worst.exact,
            y=worst.estimate,
            text=html.escape(f"{worst.head}{note}"),
            showarrow=True,
            arrowhead=0,
            ax=20,
            ay=-20,
            font={"size": 11},
        )
    numbers = html.escape(agreement.summary())
    fig.update_layout(
        title=f"{html.escape(title)}<br><sub>{numbers}</sub>",
        height=480,
        xaxis={"title": "exact patch effect"},
        yaxis={"title": f"{html.escape(estimate_name)} estimate"},
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        showlegend=False,
    )
    return fig


def weight_score_grid(values: np.ndarray, *, title: str, value_name: str) -> go.Figure:
    """A per-head weight score (copying, QK preference) on a scale reaching at least ±1."""
    return head_grid(values, title=title, value_name=value_name, floor=1.0)


def weight_vs_data(
    weight: np.ndarray,
    data: np.ndarray,
    correlation: Correlation,
    *,
    title: str,
    weight_name: str,
    data_name: str,
) -> go.Figure:
    """A weight score against its data-based twin, one point per head (customdata ``L.H``).

    Args:
        weight, data: ``layer head_index`` scores.
        correlation: a :class:`models.circuits.weight_circuits.Correlation` of the two, stated
            in the title.
        title, weight_name, data_name: text (escaped here).
    """
    n_layers, n_heads = np.shape(weight)
    fig = go.Figure(
        go.Scatter(
            x=np.asarray(data, dtype=np.float64).ravel(),
            y=np.asarray(weight, dtype=np.float64).ravel(),
            mode="markers",
            customdata=head_labels(n_layers, n_heads),
            marker={"size": 7, "color": "#1f77b4"},
            hovertemplate=(
                f"head %{{customdata}}<br>{html.escape(data_name)} %{{x:.4f}}<br>"
                f"{html.escape(weight_name)} %{{y:.4f}}<extra></extra>"
            ),
        )
    )
    stated = (
        f"Pearson {correlation.pearson:.3f}, Spearman {correlation.spearman:.3f} over "
        f"{correlation.n} heads"
    )
    fig.update_layout(
        title=f"{html.escape(title)}<br><sub>{html.escape(stated)}</sub>",
        height=420,
        xaxis={"title": html.escape(data_name)},
        yaxis={"title": html.escape(weight_name)},
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        showlegend=False,
    )
    return fig
