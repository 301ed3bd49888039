"""Plotly figures of a generation and of the KV cache: attention over the steps, every head's
row at one step, cache bytes as the text grows, and perplexity against the cache budget.

A step's attention is ``layers x heads x keys``: too much for one picture. :func:`step_grid_figure`
shows every head of every layer as one cell holding one number of its row (sink mass, or the
share on the prompt), so the whole model fits on screen and a click can pick the head to open.
Text is escaped here.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from models.classroom.costs import human_bytes
from viz.colours import colour_bar
from viz.heatmap import COLORSCALE, safe_labels

SERIES_COLOURS = {"sink": "#e4572e", "prompt": "#1f77b4", "output": "#2a9d8f", "learned": "#7b4fa0"}
POLICY_COLOURS = {"window": "#e4572e", "sinks": "#1f77b4", "h2o": "#2a9d8f"}
SHARING_COLOURS = {"model": "#1f77b4", "MHA": "#e4572e", "MQA": "#2a9d8f"}
MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}


def step_series_figure(
    sink: np.ndarray,
    prompt_share: np.ndarray,
    labels: Sequence[str],
    *,
    head: tuple[int, int] | None = None,
    title: str = "Where each new token looked",
    learned_sink: np.ndarray | None = None,
) -> go.Figure:
    """Sink mass and prompt vs output share over the steps, mean over every head.

    Args:
        sink: ``step layer head_index`` attention on position 0.
        prompt_share: ``step layer head_index`` attention on the prompt, position 0 included
            (so the sink's series is part of it, and the prompt's and output's add up to 1).
        labels: the generated token of each step (hover).
        head: also draw this ``(layer, head)`` dotted.
        title: figure title (escaped here).
        learned_sink: ``step layer head_index`` weight on the heads' learned sinks (gpt-oss),
            drawn as its own series and left out of the output's share; None without them.
    """
    steps = np.arange(sink.shape[0])
    text = safe_labels(labels)
    rest = 1.0 - prompt_share
    series = {
        "sink": ("attention on position 0 (sink)", sink),
        "prompt": ("share on the prompt (position 0 included)", prompt_share),
        "output": (
            "share on the model's own output",
            rest if learned_sink is None else rest - learned_sink,
        ),
    }
    if learned_sink is not None:
        series["learned"] = ("share on the learned sinks (no token)", learned_sink)
    fig = go.Figure()
    for key, (name, values) in series.items():
        mean = values.reshape(values.shape[0], -1).mean(axis=1)
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=mean,
                mode="lines+markers",
                name=f"{name}, mean of all heads",
                line={"color": SERIES_COLOURS[key]},
                text=text,
                hovertemplate="step %{x}: %{text}<br>%{y:.3f}<extra>%{fullData.name}</extra>",
            )
        )
        if head is not None:
            fig.add_trace(
                go.Scatter(
                    x=steps,
                    y=values[:, head[0], head[1]],
                    mode="lines",
                    name=f"{name}, head {head[0]}.{head[1]}",
                    text=text,
                    line={"color": SERIES_COLOURS[key], "dash": "dot"},
                    hovertemplate="step %{x}: %{text}<br>%{y:.3f}<extra>%{fullData.name}</extra>",
                )
            )
    fig.update_layout(
        title=html.escape(title),
        height=420,
        margin=MARGIN,
        xaxis={"title": "generation step"},
        yaxis={"title": "share of attention", "range": [0, 1.02]},
        legend={"orientation": "h", "y": -0.28, "yanchor": "top"},
    )
    return fig


def step_grid_figure(values: np.ndarray, *, title: str, value_name: str) -> go.Figure:
    """Every head of every layer as one cell holding one number of the step's row, in [0, 1].

    Args:
        values: ``layer head_index`` (e.g. a step's sink mass or prompt share).
        title: figure title; value_name: what the number is (both escaped here).
    """
    n_layers, n_heads = values.shape
    name = html.escape(value_name)
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=[str(h) for h in range(n_heads)],
            y=[str(layer) for layer in range(n_layers)],
            colorscale=COLORSCALE,
            zmin=0.0,
            zmax=1.0,
            colorbar=colour_bar(name),
            texttemplate="%{z:.2f}" if n_layers * n_heads <= 120 else None,
            hovertemplate=f"head %{{y}}.%{{x}}<br>{name} %{{z:.3f}}<extra></extra>",
        )
    )
    fig.update_layout(
        title=html.escape(title),
        height=140 + 18 * n_layers,
        margin=MARGIN,
        xaxis={"title": "head", "type": "category"},
        yaxis={"title": "layer", "autorange": "reversed", "type": "category"},
    )
    return fig


def kv_cache_figure(
    lengths: np.ndarray,
    series: dict[str, np.ndarray],
    *,
    measured: tuple[int, int] | None = None,
    names: dict[str, str] | None = None,
    title: str = "KV cache as the text grows",
) -> go.Figure:
    """Cache bytes against tokens for the model and the same model as MHA and MQA.

    Args:
        lengths: ``n`` token counts.
        series: sharing (``model``, ``MHA``, ``MQA``) -> bytes at each length.
        measured: ``(tokens, bytes)`` read from the real cache after a generation, or None.
        names: legend text per sharing (e.g. ``"this model (GQA, 3 KV heads)"``).
        title: figure title (escaped here).
    """
    fig = go.Figure()
    for key, values in series.items():
        label = html.escape((names or {}).get(key, key))
        fig.add_trace(
            go.Scatter(
                x=lengths,
                y=values,
                mode="lines",
                name=label,
                # the alternatives dotted, so one that equals this model leaves it visible
                line={"color": SHARING_COLOURS.get(key), "width": 3 if key == "model" else 2}
                | ({} if key == "model" else {"dash": "dot"}),
                text=[human_bytes(v) for v in values],
                hovertemplate="%{x:,} tokens<br>%{text}<extra>%{fullData.name}</extra>",
            )
        )
    if measured is not None:
        fig.add_trace(
            go.Scatter(
                x=[measured[0]],
                y=[measured[1]],
                mode="markers",
                name="measured cache",
                marker={"size": 11, "symbol": "diamond", "color": "#222222"},
                text=[human_bytes(measured[1])],
                hovertemplate="%{x:,} tokens<br>%{text} (real cache)<extra></extra>",
            )
        )
    top = max(float(np.max(v)) for v in series.values()) if series else 1.0
    ticks, texts = byte_ticks(top)
    fig.update_layout(
        title=html.escape(title),
        height=440,
        margin=MARGIN,
        xaxis={"title": "tokens in the cache"},
        yaxis={"title": "bytes", "tickvals": ticks, "ticktext": texts},
        legend={
            "orientation": "h",
            "yanchor": "top",
            "y": -0.18,
            "x": 0,
        },  # the plot keeps the width
    )
    return fig


def byte_ticks(top: float, most: int = 6) -> tuple[list[float], list[str]]:
    """Round tick values up to ``top`` bytes, in the unit ``top`` reads best in (B, KiB, MiB,
    GiB): 1, 2 or 5 times a power of ten of that unit apart, at most ``most`` of them."""
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    power = 0
    while power < len(units) - 1 and top >= 1024 ** (power + 1):
        power += 1
    scale = 1024**power
    span = max(top / scale, 1e-9)
    step = next(
        m * 10**e for e in range(-3, 6) for m in (1, 2, 5) if span / (m * 10**e) <= most - 1
    )
    count = int(span // step) + 1
    values = [i * step for i in range(count)]
    return [v * scale for v in values], [f"{v:g} {units[power]}" for v in values]


def eviction_figure(
    rows: Sequence[tuple[str, int, float]],
    *,
    n_tokens: int,
    names: dict[str, str] | None = None,
    title: str = "Perplexity against the cache budget",
) -> go.Figure:
    """Perplexity per policy against the budget; the full cache as a dashed line.

    Args:
        rows: ``(policy, budget, perplexity)``; the ``full`` row is drawn as a line.
        n_tokens: the text's length (budgets at or above it equal the full cache).
        names: legend text per policy.
        title: figure title (escaped here).

    The y axis is logarithmic when the values span more than a factor of 10 (a window without
    sinks can be thousands of times worse).
    """
    fig = go.Figure()
    full = [ppl for policy, _, ppl in rows if policy == "full"]
    policies = list(dict.fromkeys(policy for policy, _, _ in rows if policy != "full"))
    for policy in policies:
        points = sorted((b, p) for pol, b, p in rows if pol == policy)
        fig.add_trace(
            go.Scatter(
                x=[b for b, _ in points],
                y=[p for _, p in points],
                mode="lines+markers",
                name=html.escape((names or {}).get(policy, policy)),
                line={"color": POLICY_COLOURS.get(policy)},
                hovertemplate="budget %{x}<br>perplexity %{y:.3f}<extra>%{fullData.name}</extra>",
            )
        )
    budgets = sorted({b for pol, b, _ in rows if pol != "full"})
    if full and budgets:
        fig.add_trace(
            go.Scatter(
                x=[budgets[0], budgets[-1]],
                y=[full[0], full[0]],
                mode="lines",
                name=f"full cache ({n_tokens:,} tokens)",
                line={"color": "#555555", "dash": "dash"},
                hovertemplate="full cache: %{y:.3f}<extra></extra>",
            )
        )
    values = np.array([p for _, _, p in rows], dtype=np.float64)
    log_y = values.size > 0 and values.min() > 0 and values.max() / values.min() > 10
    fig.update_layout(
        title=html.escape(title),
        height=400,
        margin=MARGIN,
        xaxis={
            "title": "cache budget (keys each token may see)",
            "type": "log",
            "tickvals": budgets,
            "ticktext": [str(b) for b in budgets],
        },
        yaxis={"title": "perplexity", "type": "log" if log_y else "linear"},
    )
    return fig
