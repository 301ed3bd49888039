"""Plotly figures of the scaling sweep: saturation curves, loss over the factor, synthetic panel.

Token labels pass through :func:`viz.heatmap.safe_labels` (plotly renders some HTML in text).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from models.scaling.maths import ONE_HOT, SweepStats, SyntheticPanel
from viz.heatmap import COLORSCALE, masked, safe_labels

PANELS = (
    ("entropy", "Mean row entropy H (nats)"),
    ("norm_entropy", "Normalised entropy H / log(n allowed)"),
    ("max_weight", "Mean max weight"),
    ("eff_keys", "Effective keys exp(H)"),
    ("jacobian", "Softmax Jacobian: Frobenius norm of diag(p) − ppᵀ"),
)
OWN, PICKED, HEAD, MEAN, BAND = "#e4572e", "#555555", "#1f77b4", "#2a9d8f", "rgba(42,157,143,0.18)"


def factor_label(c: float) -> str:
    """A factor as the slider writes it: ``4``, ``1``, ``1/8``."""
    return f"{c:.3g}" if c >= 1 else f"1/{1 / c:.3g}"


def factor_ticks(x: np.ndarray) -> dict:
    """Log-axis ticks at the powers of two inside ``x``'s range, labelled like the slider."""
    lo, hi = float(np.min(x)), float(np.max(x))
    powers = [2.0**p for p in range(-12, 13) if lo * 0.999 <= 2.0**p <= hi * 1.001]
    return {"tickvals": powers, "ticktext": [factor_label(c) for c in powers]}


def _marker_lines(fig: go.Figure, own_x: float, picked_x: float | None, **cell) -> None:
    """The model's own scale (dashed red) and the picked point (dotted grey), at their data
    values: plotly draws a vertical line of a log axis at the value given, not at its log."""
    fig.add_vline(x=float(own_x), line=dict(color=OWN, dash="dash", width=1.5), **cell)
    if picked_x is not None and not np.isclose(picked_x, own_x):
        fig.add_vline(x=float(picked_x), line=dict(color=PICKED, dash="dot", width=1), **cell)


def saturation_figure(
    stats: SweepStats,
    x: np.ndarray,
    *,
    x_title: str,
    own_x: float,
    picked_x: float | None = None,
    head: tuple[int, int] | None = None,
    log_x: bool = True,
) -> go.Figure:
    """Five panels of row statistics over the sweep.

    Every panel shows the mean over all heads with a min-max band across heads, the chosen head
    (if any), dotted limits for uniform rows (c -> 0) and one-hot rows (c -> infinity), the
    model's own scale (dashed red) and the picked point (dotted grey).

    Args:
        stats: the sweep, ``n_c layer head_index`` arrays.
        x: ``(n_c,)`` x values (the factors, or alpha).
        x_title: x-axis title.
        own_x: x of the model's own scale (1 for factors, 0.5 for alpha).
        picked_x: x of the slider's choice.
        head: ``(layer, head)`` to draw on top, or None.
        log_x: log-scaled x axis.
    """
    fig = make_subplots(
        rows=2,
        cols=3,
        subplot_titles=[title for _, title in PANELS],
        horizontal_spacing=0.07,
        vertical_spacing=0.16,
    )
    for i, (name, _title) in enumerate(PANELS):
        cell = dict(row=i // 3 + 1, col=i % 3 + 1)
        values = getattr(stats, name).reshape(len(x), -1)
        first = i == 0
        fig.add_trace(
            go.Scatter(
                x=x, y=values.max(axis=1), line=dict(width=0), hoverinfo="skip", showlegend=False
            ),
            **cell,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=values.min(axis=1),
                fill="tonexty",
                fillcolor=BAND,
                line=dict(width=0),
                name="range over heads",
                hoverinfo="skip",
                showlegend=first,
                legendgroup="band",
            ),
            **cell,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=values.mean(axis=1),
                mode="lines",
                name="mean of all heads",
                line=dict(color=MEAN, width=2),
                showlegend=first,
                legendgroup="mean",
            ),
            **cell,
        )
        if head is not None:
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=stats.curve(name, *head),
                    mode="lines+markers",
                    name=f"head {head[0]}.{head[1]}",
                    marker=dict(size=4),
                    line=dict(color=HEAD),
                    showlegend=first,
                    legendgroup="head",
                ),
                **cell,
            )
        for value, label in ((stats.uniform[name], "uniform"), (ONE_HOT[name], "one-hot")):
            fig.add_hline(
                y=value,
                line=dict(color="#999999", dash="dot", width=1),
                annotation_text=label,
                annotation_font_size=10,
                annotation_position="top left",
                **cell,
            )
        _marker_lines(fig, own_x, picked_x, **cell)
        fig.update_xaxes(
            type="log" if log_x else "linear",
            title_text=x_title,
            **(factor_ticks(x) if log_x else {}),
            **cell,
        )
    fig.update_layout(
        height=620, margin=dict(l=40, r=20, t=60, b=40), legend=dict(orientation="h", y=-0.12)
    )
    return fig


def loss_figure(
    x: np.ndarray,
    losses: np.ndarray,
    *,
    x_title: str,
    own_x: float,
    picked_x: float | None = None,
    log_x: bool = True,
) -> go.Figure:
    """Next-token loss with every head at each factor; the minimum is circled.

    Args:
        x: ``(n_c,)`` x values; losses: ``(n_c,)`` mean cross-entropy in nats.
    """
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=losses,
            mode="lines+markers",
            name="loss",
            hovertemplate="%{x:.3g}: %{y:.4f} nats<extra></extra>",
        )
    )
    best = int(np.nanargmin(losses))
    fig.add_trace(
        go.Scatter(
            x=[x[best]],
            y=[losses[best]],
            mode="markers",
            name="minimum",
            marker=dict(size=14, symbol="circle-open", color=OWN),
        )
    )
    _marker_lines(fig, own_x, picked_x)
    fig.update_xaxes(
        type="log" if log_x else "linear", title_text=x_title, **(factor_ticks(x) if log_x else {})
    )
    fig.update_yaxes(title_text="next-token loss (nats)")
    fig.update_layout(height=360, margin=dict(l=40, r=20, t=30, b=40))
    return fig


def extremes_figure(
    patterns: Sequence[np.ndarray], titles: Sequence[str], labels: Sequence[str], *, causal: bool
) -> go.Figure:
    """Side-by-side heatmaps of one head at a few factors, on the same 0..1 colour scale.

    Args:
        patterns: ``query_pos key_pos`` patterns, one per panel.
        titles: panel titles; labels: ``(i) token`` per position (escaped here).
    """
    safe = safe_labels(labels)
    fig = make_subplots(
        rows=1, cols=len(patterns), subplot_titles=list(titles), horizontal_spacing=0.03
    )
    for i, pattern in enumerate(patterns):
        fig.add_trace(
            go.Heatmap(
                z=masked(pattern, causal),
                x=safe,
                y=safe,
                zmin=0,
                zmax=1,
                colorscale=COLORSCALE,
                showscale=i == len(patterns) - 1,
                hovertemplate="query %{y}<br>key %{x}<br>%{z:.3f}<extra></extra>",
            ),
            row=1,
            col=i + 1,
        )
        fig.update_xaxes(showticklabels=False, row=1, col=i + 1)
        fig.update_yaxes(showticklabels=False, autorange="reversed", row=1, col=i + 1)
    fig.update_layout(height=330, margin=dict(l=10, r=10, t=40, b=10))
    return fig


# The synthetic charts sit two to a row: a legend beside the plot took about 40 % of a
# chart's width at 1,280 px and pushed its d_k labels sideways; below the x axis it takes none.
UNDER_PLOT = dict(orientation="h", x=0, xanchor="left", y=-0.22, yanchor="top")


def variance_figure(panel: SyntheticPanel) -> go.Figure:
    """Measured ``Var(q . k)`` against ``d_k``, raw and divided by ``sqrt(d_k)``, log-log."""
    d = panel.d_ks.astype(float)
    fig = go.Figure(
        [
            go.Scatter(
                x=d, y=d, mode="lines", name="Var = d_k", line=dict(dash="dash", color="#999")
            ),
            go.Scatter(x=d, y=panel.var_raw, mode="markers+lines", name="q · k (measured)"),
            go.Scatter(
                x=d,
                y=np.ones_like(d),
                mode="lines",
                name="Var = 1",
                line=dict(dash="dot", color="#999"),
            ),
            go.Scatter(
                x=d, y=panel.var_scaled, mode="markers+lines", name="q · k / √d_k (measured)"
            ),
        ]
    )
    fig.update_xaxes(type="log", title_text="d_k", tickvals=d, ticktext=[str(int(v)) for v in d])
    fig.update_yaxes(type="log", title_text="variance of the logit")
    fig.update_layout(height=400, margin=dict(l=40, r=20, t=30, b=40), legend=UNDER_PLOT)
    return fig


def max_weight_figure(panel: SyntheticPanel) -> go.Figure:
    """Mean largest softmax weight over ``n_keys`` random keys, raw and scaled, against ``d_k``."""
    d = panel.d_ks.astype(float)
    fig = go.Figure(
        [
            go.Scatter(x=d, y=panel.max_raw, mode="markers+lines", name="softmax(q · k)"),
            go.Scatter(x=d, y=panel.max_scaled, mode="markers+lines", name="softmax(q · k / √d_k)"),
            go.Scatter(
                x=d,
                y=np.full_like(d, 1 / panel.n_keys),
                mode="lines",
                name=f"uniform (1/{panel.n_keys})",
                line=dict(dash="dot", color="#999"),
            ),
        ]
    )
    fig.update_xaxes(type="log", title_text="d_k", tickvals=d, ticktext=[str(int(v)) for v in d])
    fig.update_yaxes(range=[0, 1.02], title_text="mean max weight")
    fig.update_layout(height=400, margin=dict(l=40, r=20, t=30, b=40), legend=UNDER_PLOT)
    return fig
