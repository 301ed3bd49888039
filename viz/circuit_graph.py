"""The circuit graph as a plotly figure: heads placed by layer (y) and head index (x), the
edges of a :class:`models.circuits.graph.CircuitGraph` above a threshold as lines whose width
grows with the effect, red for positive and blue for negative, q solid, k dashed, v dotted.

Each node's ``customdata`` is its ``L.H`` so that a page can open the head in the explorer from a
click; an edge's midpoint carries its hover text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from viz.circuits_figures import DIVERGING, head_labels, symmetric_range
from viz.colours import NEGATIVE, POSITIVE, colour_bar

if TYPE_CHECKING:
    from models.circuits.graph import CircuitGraph, Edge

EDGE_DASH = {"q": "solid", "k": "dash", "v": "dot"}
EDGE_WIDTHS = (1.0, 2.5, 4.5, 7.0)
MAX_EDGES = 400
MID_NUDGE = 0.25  # how far (in heads) an edge's hover point moves off a node it would cover


def _edge_traces(edges: Sequence[Edge], top: float) -> list[go.Scatter]:
    """Edges grouped by sign, input and width bucket: one line trace each, plus hover points.

    An edge's hover point sits at its midpoint, moved sideways when that is a node (an edge
    from L.H to (L+2).H passes over (L+1).H), so that a click there picks the head."""
    groups: dict[tuple, tuple[list, list]] = {}
    mid_x, mid_y, mid_text = [], [], []
    for edge in edges:
        bucket = min(int(len(EDGE_WIDTHS) * abs(edge.weight) / top), len(EDGE_WIDTHS) - 1)
        xs, ys = groups.setdefault((edge.weight >= 0, edge.input, bucket), ([], []))
        xs += [edge.sender.index, edge.receiver.index, None]
        ys += [edge.sender.layer, edge.receiver.layer, None]
        x = (edge.sender.index + edge.receiver.index) / 2
        y = (edge.sender.layer + edge.receiver.layer) / 2
        if x.is_integer() and y.is_integer():  # on a node: the node keeps its hover and click
            x += MID_NUDGE
        mid_x.append(x)
        mid_y.append(y)
        mid_text.append(html.escape(edge.label()))
    traces = [
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines",
            hoverinfo="skip",
            showlegend=False,
            line={
                "color": POSITIVE if positive else NEGATIVE,
                "width": EDGE_WIDTHS[bucket],
                "dash": EDGE_DASH[which],
            },
            opacity=0.75,
        )
        for (positive, which, bucket), (xs, ys) in sorted(groups.items())
    ]
    traces.append(
        go.Scatter(
            x=mid_x,
            y=mid_y,
            mode="markers",
            text=mid_text,
            showlegend=False,
            marker={"size": 6, "color": "rgba(0,0,0,0.15)"},
            selected={"marker": {"opacity": 1.0}},
            unselected={"marker": {"opacity": 1.0}},
            hovertemplate="%{text}<extra></extra>",
        )
    )
    return traces


def circuit_graph_figure(
    graph: CircuitGraph, threshold: float = 0.0, *, title: str, node_name: str = "value"
) -> go.Figure:
    """Heads placed by layer (y) and head index (x), edges above ``threshold`` as lines.

    Width grows with ``|weight|``, red for positive and blue for negative effects; q edges
    solid, k dashed, v dotted. Hovering an edge's midpoint names it (``5.1 -> 9.6 (q) +0.083``);
    hovering a node names the head. Every node's ``customdata`` is its ``L.H``, so a page can
    open the head in the explorer from a click.

    Args:
        graph: a :class:`models.circuits.graph.CircuitGraph`.
        threshold: smallest ``|weight|`` drawn (at most :data:`MAX_EDGES` edges, strongest).
        title: figure title (escaped here).
        node_name: what ``graph.node_values`` are, for the hover.
    """
    shown = graph.above(threshold).edges
    capped = len(shown) > MAX_EDGES
    shown = shown[:MAX_EDGES]
    top = max((abs(e.weight) for e in shown), default=1.0) or 1.0
    fig = go.Figure(_edge_traces(shown, top * (1 + 1e-9)))
    layers, heads = np.divmod(np.arange(graph.n_layers * graph.n_heads), graph.n_heads)
    used = {str(h) for h in graph.above(threshold).nodes()}
    labels = head_labels(graph.n_layers, graph.n_heads)
    values = (
        np.zeros(len(labels))
        if graph.node_values is None
        else np.asarray(graph.node_values, dtype=np.float64).ravel()
    )
    span = symmetric_range(values, 1e-9)
    fig.add_trace(
        go.Scatter(
            x=heads,
            y=layers,
            mode="markers",
            customdata=labels,
            showlegend=False,
            marker={
                "size": [13 if label in used else 6 for label in labels],
                "color": values,
                "colorscale": DIVERGING,
                "cmin": -span,
                "cmax": span,
                "line": {"width": 1, "color": "#444444"},
                "showscale": graph.node_values is not None,
                "colorbar": colour_bar(html.escape(node_name), thickness=14),
            },
            # a click opens the head: the graph stays as it was, nothing is greyed out
            selected={"marker": {"opacity": 1.0}},
            unselected={"marker": {"opacity": 1.0}},
            hovertemplate=(
                f"head %{{customdata}}<br>{html.escape(node_name)} %{{marker.color:.4f}}"
                "<extra></extra>"
            ),
        )
    )
    note = f"{len(shown)} edges with |effect| ≥ {threshold:g}" + (
        " (strongest shown)" if capped else ""
    )
    if graph.source:
        note += f", from {graph.source}"
    fig.update_layout(
        title=f"{html.escape(title)}<br><sub>{html.escape(note)}</sub>",
        height=max(360, 60 + 26 * graph.n_layers),
        xaxis={
            "title": "head",
            "dtick": 1,
            "zeroline": False,
            "range": [-0.5, graph.n_heads - 0.5],
        },
        yaxis={
            "title": "layer",
            "dtick": 1,
            "zeroline": False,
            "range": [-0.5, graph.n_layers - 0.5],
        },
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        hovermode="closest",
    )
    return fig
