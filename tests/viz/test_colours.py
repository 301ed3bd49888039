"""One meaning of red and blue: compare's A − B, patching and DLA grids, the circuit graph and
why-here's bars all draw a positive value red and a negative one blue, from viz.colours."""

import numpy as np
import plotly.colors

from models.circuits.graph import CircuitGraph, Edge
from models.head import Head
from viz import colours
from viz.circuit_graph import circuit_graph_figure
from viz.circuits_figures import head_grid
from viz.heatmap import heatmap_data, heatmap_figure
from viz.why_figures import _bars


def rgb(colour: str) -> tuple[float, ...]:
    if colour.startswith("#"):
        return tuple(float(int(colour[i : i + 2], 16)) for i in (1, 3, 5))
    return tuple(float(x) for x in colour[colour.index("(") + 1 : -1].split(","))


def reddish(colour: str) -> bool:
    r, _, b = rgb(colour)
    return r > b + 60


def bluish(colour: str) -> bool:
    r, _, b = rgb(colour)
    return b > r + 60


def ends(scale) -> tuple[str, str]:
    """The colours a figure's scale gives its lowest and highest values."""
    stops = plotly.colors.get_colorscale(scale) if isinstance(scale, str) else scale
    return stops[0][1], stops[-1][1]


def test_the_shared_scale_runs_from_blue_to_red():
    low, high = ends(colours.SIGNED)
    assert bluish(low) and reddish(high)
    assert reddish(colours.POSITIVE) and bluish(colours.NEGATIVE)


def test_every_signed_figure_draws_positive_red_and_negative_blue():
    values = np.array([[-0.5, 0.2], [0.1, 0.9]])
    graph = CircuitGraph(2, 2, (Edge(Head(0, 0), Head(1, 1), "q", 0.4),), values, "patching")
    scales = {
        "A − B": heatmap_figure(heatmap_data(values, ["a", "b"], causal=False, signed=True))
        .data[0]
        .colorscale,
        "patching": head_grid(values, title="t", value_name="patch effect").data[0].colorscale,
        "DLA": head_grid(values, title="t", value_name="DLA").data[0].colorscale,
        "graph nodes": circuit_graph_figure(graph, title="t").data[-1].marker.colorscale,
    }
    expected = plotly.colors.get_colorscale(colours.SIGNED)
    for name, scale in scales.items():
        low, high = ends(scale)
        assert bluish(low) and reddish(high), name
        assert [c for _, c in scale] == [c for _, c in expected], name
        assert np.allclose([p for p, _ in scale], [p for p, _ in expected], atol=1e-12), name
    edge = next(t for t in circuit_graph_figure(graph, title="t").data if t.mode == "lines")
    assert reddish(edge.line.color)  # a positive edge
    bars = _bars(["a", "b"], np.array([0.3, -0.2]), 2, "query").marker.color
    assert reddish(bars[0]) and bluish(bars[1])
