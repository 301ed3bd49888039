"""The circuit graph figure: nodes placed by layer and head with their L.H, edges above the
threshold drawn by sign, input and size, hover text on each edge."""

import numpy as np

from models.circuits.graph import CircuitGraph, Edge
from models.head import Head
from viz.circuit_graph import EDGE_WIDTHS, MAX_EDGES, NEGATIVE, POSITIVE, circuit_graph_figure


def graph(edges, values=None):
    return CircuitGraph(3, 2, tuple(edges), values, "path patching")


def test_nodes_carry_their_heads_and_sit_by_layer():
    edges = [Edge(Head(0, 1), Head(2, 0), "q", 0.5), Edge(Head(1, 0), Head(2, 0), "k", -0.1)]
    fig = circuit_graph_figure(graph(edges, np.arange(6.0).reshape(3, 2)), title="<x>")
    nodes = fig.data[-1]
    assert list(nodes.customdata) == ["0.0", "0.1", "1.0", "1.1", "2.0", "2.1"]
    assert list(nodes.x) == [0, 1, 0, 1, 0, 1] and list(nodes.y) == [0, 0, 1, 1, 2, 2]
    assert list(nodes.marker.size) == [6, 13, 13, 6, 13, 6]  # heads an edge touches are larger
    assert fig.layout.title.text.startswith("&lt;x&gt;<br><sub>2 edges with |effect| ≥ 0")


def test_edges_by_threshold_sign_input_and_size():
    edges = [
        Edge(Head(0, 1), Head(2, 0), "q", 0.5),
        Edge(Head(1, 0), Head(2, 1), "k", -0.1),
        Edge(Head(0, 0), Head(1, 1), "v", 0.01),
    ]
    fig = circuit_graph_figure(graph(edges), threshold=0.05, title="g")
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == 2
    strong = next(t for t in lines if t.line.color == POSITIVE)
    weak = next(t for t in lines if t.line.color == NEGATIVE)
    assert list(strong.x) == [1, 0, None] and list(strong.y) == [0, 2, None]
    assert strong.line.width == EDGE_WIDTHS[-1] and strong.line.dash == "solid"
    assert weak.line.width < strong.line.width and weak.line.dash == "dash"
    hover = fig.data[-2]
    assert list(hover.text) == ["0.1 -&gt; 2.0 (q) +0.500", "1.0 -&gt; 2.1 (k) -0.100"]


def test_many_edges_are_capped_to_the_strongest():
    edges = [
        Edge(Head(0, i % 2), Head(2, i % 2), "q", 1.0 - i / 1000) for i in range(MAX_EDGES + 5)
    ]
    fig = circuit_graph_figure(graph(edges), title="g")
    assert len(fig.data[-2].text) == MAX_EDGES
    assert "(strongest shown)" in fig.layout.title.text


def test_an_edge_over_a_node_leaves_the_node_its_hover():
    edges = [Edge(Head(0, 0), Head(2, 0), "q", 0.5), Edge(Head(0, 0), Head(1, 1), "k", 0.2)]
    hover = circuit_graph_figure(graph(edges), title="g").data[-2]
    # 0.0 -> 2.0 passes over node 1.0 at (0, 1): its hover point moves a quarter head aside;
    # 0.0 -> 1.1 has its midpoint (0.5, 0.5) between nodes and keeps it
    assert list(hover.x) == [0.25, 0.5] and list(hover.y) == [1.0, 0.5]


def test_axes_hold_the_layers_the_scale_is_titled_and_a_click_greys_nothing():
    edges = [Edge(Head(0, 1), Head(2, 0), "q", 0.5)]
    fig = circuit_graph_figure(
        graph(edges, np.arange(6.0).reshape(3, 2)), title="g", node_name="DLA"
    )
    assert list(fig.layout.yaxis.range) == [-0.5, 2.5]  # layers 0 to 2, no layer -1 or 3
    assert list(fig.layout.xaxis.range) == [-0.5, 1.5]
    nodes = fig.data[-1]
    assert nodes.marker.showscale and nodes.marker.colorbar.title.text == "DLA"
    for trace in fig.data:
        if trace.mode == "markers":  # what a click selects: drawn as before, not dimmed
            assert trace.unselected.marker.opacity == trace.selected.marker.opacity == 1.0
