"""What the Circuits page derives from its results, as pure functions: the default receiver
and threshold, composition scores as graph edges, direct logit attribution's ranks, and the
sentences that say what a graph or an option adds. No Streamlit here."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.circuits.composition import Composition
from models.circuits.cost import PassPlan
from models.circuits.graph import CircuitGraph, Edge
from models.head import Head
from models.model.weights import Projection

TOP_EDGES = 20  # the default threshold shows about this many edges
KEPT_PAIRS = 400  # composition edges kept per kind before the threshold


def extra_cost(more: PassPlan, base: PassPlan) -> str:
    """What ``more`` costs beyond ``base``: ``+14.5 backward passes, about +6 s, +38 MB``."""
    parts = []
    for name, diff in (
        ("forward", more.forward_passes - base.forward_passes),
        ("backward", more.backward_passes - base.backward_passes),
    ):
        if diff > 0:
            parts.append(f"+{diff:.3g} {name} pass{'' if diff == 1 else 'es'}")
    seconds = more.seconds - base.seconds
    parts.append(f"about +{seconds:.2g} s" if seconds >= 0.05 else "under +0.1 s")
    extra_mb = (more.peak_bytes - base.peak_bytes) / 2**20
    if extra_mb >= 1:
        parts.append(f"+{extra_mb:.0f} MB")
    return ", ".join(parts)


def default_receiver(dla: np.ndarray) -> Head:
    """The head (above layer 0) whose direct effect on LD is largest: where a circuit ends."""
    later = np.asarray(dla, dtype=np.float64).copy()
    later[0] = -np.inf
    if later.shape[0] < 2 or not np.isfinite(later).any():
        return Head(min(1, later.shape[0] - 1), 0)
    layer, index = np.unravel_index(int(np.nanargmax(later)), later.shape)
    return Head(int(layer), int(index))


def default_threshold(weights: Sequence[float], shown: int = TOP_EDGES) -> float:
    """A threshold that shows about ``shown`` edges: the ``shown``-th largest ``|weight|``."""
    sizes = sorted((abs(float(w)) for w in weights if np.isfinite(w) and w != 0), reverse=True)
    if not sizes:
        return 0.0
    return sizes[min(shown, len(sizes)) - 1]


def composition_graph(
    composition: Composition, n_layers: int, kinds: Sequence[Projection], keep: int = KEPT_PAIRS
) -> CircuitGraph:
    """Composition scores as graph edges: the ``keep`` strongest pairs of each kind."""
    edges = []
    for kind in kinds:
        scores = getattr(composition, kind)
        flat = np.where(np.isfinite(scores), scores, -np.inf).ravel()
        top = np.argsort(-flat, kind="stable")[:keep]
        n = scores.shape[1]
        edges += [
            Edge(composition.head(int(i) // n), composition.head(int(i) % n), kind, float(flat[i]))
            for i in top
            if np.isfinite(flat[i])
        ]
    edges.sort(key=lambda e: (-abs(e.weight), e.receiver, e.sender, e.input))
    return CircuitGraph(
        n_layers, composition.n_heads, tuple(edges), None, "composition scores (weights)"
    )


def dla_ranks(dla: np.ndarray) -> dict[Head, int]:
    """Each head's rank by ``|DLA|`` (1: the largest direct effect on LD)."""
    values = np.abs(np.nan_to_num(np.asarray(dla, dtype=np.float64)))
    order = np.argsort(-values, axis=None, kind="stable")
    n_heads = values.shape[1]
    return {Head(int(i) // n_heads, int(i) % n_heads): rank + 1 for rank, i in enumerate(order)}


def endings(edges: Sequence[Edge], dla: np.ndarray, n_edges: int = 10, n_top: int = 5) -> str:
    """Where the ``n_edges`` strongest edges end, against direct logit attribution's ranking:
    ``The 10 strongest edges end at 23.3 (DLA rank 1, 6 edges), …; 2 of the 5 heads DLA ranks
    highest receive one.``"""
    strongest = list(edges[:n_edges])
    if not strongest:
        return "No edge is above the threshold."
    ranks = dla_ranks(dla)
    counts: dict[Head, int] = {}
    for edge in strongest:
        counts[edge.receiver] = counts.get(edge.receiver, 0) + 1
    ends = sorted(counts, key=lambda h: (ranks.get(h, 10**9), h))
    said = ", ".join(
        f"{h} (DLA rank {ranks.get(h, '?')}, {counts[h]} edge{'s' if counts[h] != 1 else ''})"
        for h in ends
    )
    top = {h for h, rank in ranks.items() if rank <= n_top}
    hit = len(top & set(counts))
    return (
        f"The {len(strongest)} strongest edges end at {said}; {hit} of the {n_top} heads "
        f"direct logit attribution ranks highest receive one."
    )


def default_composition_receiver(composition: Composition, kind: Projection) -> Head:
    """The head the strongest ``kind`` composition goes into."""
    scores = getattr(composition, kind)
    if not np.isfinite(scores).any():
        return composition.head(0)
    flat = int(np.nanargmax(np.where(np.isfinite(scores), scores, -np.inf)))
    return composition.head(flat % scores.shape[1])
