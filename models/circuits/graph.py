"""The circuit graph: heads as nodes placed by layer, head-to-head edges weighted by a path
effect, kept above a threshold.

Edges come from exact path patching (:func:`graph_from_paths`, one receiver input per
:class:`~models.circuits.paths.PathResult`) or from the attribution-patching estimates of every
edge at once (:func:`graph_from_estimates`). On a GQA model a k or v edge enters a key/value
head that several query heads read; the graph draws it into each of them and says so
(:attr:`Edge.shared_by`), with the same weight.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from models.circuits.edges import INPUTS, EdgeEstimates
from models.circuits.paths import PathResult
from models.head import Head
from models.model.weights import Projection


@dataclass(frozen=True)
class Edge:
    """Sender -> receiver through one receiver input, with its (normalised) effect."""

    sender: Head
    receiver: Head
    input: Projection
    weight: float
    shared_by: tuple[int, ...] = ()

    def label(self) -> str:
        """``5.1 -> 9.6 (q) +0.083`` (with the sharing heads for a shared k or v)."""
        shared = (
            f", shared by {', '.join(f'{self.receiver.layer}.{h}' for h in self.shared_by)}"
            if len(self.shared_by) > 1
            else ""
        )
        return f"{self.sender} -> {self.receiver} ({self.input}{shared}) {self.weight:+.3f}"


@dataclass(frozen=True)
class CircuitGraph:
    """Heads and the edges between them.

    Attributes:
        n_layers, n_heads: the model's shape (where nodes go).
        edges: the edges, largest ``|weight|`` first.
        node_values: ``layer head_index`` a value per head to colour nodes by (e.g. AtP* or
            direct logit attribution), or ``None``.
        source: what the weights are (``"path patching"`` or ``"AtP* estimate"``).
    """

    n_layers: int
    n_heads: int
    edges: tuple[Edge, ...]
    node_values: np.ndarray | None = None
    source: str = ""

    def above(self, threshold: float) -> CircuitGraph:
        """The graph with only the edges of ``|weight| >= threshold``."""
        return replace(self, edges=tuple(e for e in self.edges if abs(e.weight) >= threshold))

    def strongest(self, n: int) -> tuple[Edge, ...]:
        """The ``n`` edges of largest ``|weight|``."""
        return self.edges[:n]

    def nodes(self) -> list[Head]:
        """Every head an edge touches, in layer order."""
        return sorted({e.sender for e in self.edges} | {e.receiver for e in self.edges})

    def receivers(self) -> list[Head]:
        """Heads an edge ends at, in layer order."""
        return sorted({e.receiver for e in self.edges})


def _sorted(edges: Iterable[Edge]) -> tuple[Edge, ...]:
    return tuple(sorted(edges, key=lambda e: (-abs(e.weight), e.receiver, e.sender, e.input)))


def graph_from_paths(
    results: Sequence[PathResult],
    n_layers: int,
    n_heads: int,
    node_values: np.ndarray | None = None,
    min_weight: float = 0.0,
) -> CircuitGraph:
    """Edges from exact path patching results (one receiver input each).

    Args:
        results: :func:`models.circuits.paths.path_patching` outputs.
        n_layers, n_heads: the model's shape.
        node_values: optional per-head values for the nodes.
        min_weight: keep edges with ``|effect| >= min_weight`` (and never exact zeros).
    """
    edges = []
    for result in results:
        receivers = (
            [result.receiver]
            if result.input == "q"
            else [Head(result.receiver.layer, h) for h in result.shared_by]
        )
        for sender in zip(
            *np.nonzero(np.abs(result.effects) >= max(min_weight, 1e-300)), strict=True
        ):
            head = Head(int(sender[0]), int(sender[1]))
            for receiver in receivers:
                edges.append(
                    Edge(
                        head, receiver, result.input, float(result.effects[head]), result.shared_by
                    )
                )
    return CircuitGraph(n_layers, n_heads, _sorted(set(edges)), node_values, "path patching")


def graph_from_estimates(
    estimates: EdgeEstimates,
    node_values: np.ndarray | None = None,
    min_weight: float = 0.0,
    inputs: Sequence[Projection] = INPUTS,
) -> CircuitGraph:
    """Edges from :func:`models.circuits.edges.edge_estimates` with ``|weight| >= min_weight``.

    Args:
        estimates: every sender into every receiver input.
        node_values: optional per-head values for the nodes.
        min_weight: the smallest ``|weight|`` kept (a page moves the threshold afterwards with
            :meth:`CircuitGraph.above`).
        inputs: which receiver inputs to draw.
    """
    group = estimates.group
    n_layers, n_heads = estimates.q.shape[0], estimates.q.shape[1]
    edges = []
    for which in inputs:
        values = estimates.of(which)
        for r_layer, r_index, s_layer, s_head in zip(
            *np.nonzero((np.abs(values) >= min_weight) & (values != 0)), strict=True
        ):
            weight = float(values[r_layer, r_index, s_layer, s_head])
            sender = Head(int(s_layer), int(s_head))
            if which == "q":
                edges.append(Edge(sender, Head(int(r_layer), int(r_index)), which, weight))
                continue
            shared = tuple(range(int(r_index) * group, (int(r_index) + 1) * group))
            edges += [Edge(sender, Head(int(r_layer), h), which, weight, shared) for h in shared]
    label = "AtP* estimate" if estimates.qk_fix else "AtP estimate"
    return CircuitGraph(n_layers, n_heads, _sorted(edges), node_values, label)
