"""The Circuits page's state as one frozen value, and every way it changes, as pure functions.

:class:`CircuitsState` holds the task (a preset or the visitor's own prompts and tokens), the
open tab, what each section looks at (a head, a receiver and its input, the graph's source and
threshold, a composition kind) and what the visitor asked to run (work whose estimate is over
:data:`AUTO_S` seconds waits to be asked; cheaper work runs by itself). Widgets only display it;
their callbacks replace it through the transitions below. A new model starts from its first
preset unless the visitor's own prompts are chosen, which survive. No Streamlit here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

import numpy as np

from models.circuits.composition import Composition
from models.circuits.cost import PassPlan
from models.circuits.graph import CircuitGraph, Edge
from models.circuits.head_weights import Projection
from models.circuits.paths import MLPMode
from models.circuits.task import CircuitTask
from models.head import Head

OWN = "Your own prompts"
AUTO_S = 15.0  # work estimated to take at most this long runs without being asked
MAX_PATHS = 16  # path patching requests remembered (the graph draws the finished ones)
TOP_EDGES = 20  # the default threshold shows about this many edges
KEPT_PAIRS = 400  # composition edges kept per kind before the threshold

Tab = Literal["patching", "atp", "paths", "weights"]
TABS: tuple[Tab, ...] = get_args(Tab)
Node = Literal["z", "q", "k", "v"]
NODES: tuple[Node, ...] = get_args(Node)
GraphSource = Literal["estimates", "paths", "weights"]
GRAPH_SOURCES: tuple[GraphSource, ...] = get_args(GraphSource)
INPUTS: tuple[Projection, ...] = get_args(Projection)
MLP_MODES: tuple[MLPMode, ...] = get_args(MLPMode)
CostlyWork = Literal["atp", "weights", "data"]  # what waits to be asked for when slow
EMPTY = CircuitTask("", "", "", "")


@dataclass(frozen=True)
class AtPOptions:
    """How attribution patching runs: the two AtP* fixes, how many top heads are checked by
    exact patching, and the edge estimates (None: none; else how MLPs are treated)."""

    qk_fix: bool = True
    grad_drop: bool = False
    verify_top: int = 0
    edges: MLPMode | None = None


@dataclass(frozen=True)
class PathRequest:
    """Path patching into one receiver input."""

    receiver: Head
    input: Projection = "q"
    mlps: MLPMode = "recomputed"


@dataclass(frozen=True)
class CircuitsState:
    """What the Circuits page shows (see the module docstring).

    Attributes:
        model: the model the state was made for (an opaque key).
        preset: the chosen preset's name, or :data:`OWN`.
        task: the prompts and tokens as typed.
        tab: the open tab.
        exact: patch every head exactly (None: when the model has at most 48 heads).
        position_head: the head patched position by position (None: the strongest).
        atp: attribution patching's options (``edges`` None: on when cheap, see ``edges_on``).
        edges_on: estimate every edge too (None: when cheap).
        edges_mode: how the edge estimates treat MLPs.
        node: which AtP* estimate the heatmap shows.
        atp_head: the head whose per-position estimate is shown (None: the strongest).
        path: the receiver the path section shows (None: the head DLA ranks highest).
        paths: path patching asked for, oldest first (the graph draws the finished ones).
        graph_source: where the graph's edges come from (None: the best available).
        graph_inputs: which receiver inputs the graph draws.
        threshold: the graph's smallest |weight| (None: about :data:`TOP_EDGES` edges).
        graph_head: the node picked in the graph.
        composition: the composition kind the weights section shows.
        composition_receiver: its receiver (None: the most composed-into head).
        weight_score: the per-head weight score shown.
        twin: the weight score against data pair shown.
        asked: costly work the visitor asked for.
    """

    model: object = None
    preset: str = ""
    task: CircuitTask = EMPTY
    tab: Tab = "patching"
    exact: bool | None = None
    position_head: Head | None = None
    atp: AtPOptions = AtPOptions()
    edges_on: bool | None = None
    edges_mode: MLPMode = "recomputed"
    node: Node = "z"
    atp_head: Head | None = None
    path: PathRequest | None = None
    paths: tuple[PathRequest, ...] = ()
    graph_source: GraphSource | None = None
    graph_inputs: tuple[Projection, ...] = INPUTS
    threshold: float | None = None
    graph_head: Head | None = None
    composition: Projection = "q"
    composition_receiver: Head | None = None
    weight_score: str = "copying"
    twin: str = "copying_induction"
    asked: frozenset[CostlyWork] = frozenset()


# --- the task -----------------------------------------------------------------------------------


def for_model(
    state: CircuitsState, model: object, tasks: Mapping[str, CircuitTask]
) -> CircuitsState:
    """The state for ``model``: the same one if it was made for it; else a fresh one on the
    first preset, or with the visitor's own prompts kept when those are chosen."""
    if state.model == model and state.model is not None:
        return state
    fresh = CircuitsState(model=model, tab=state.tab)
    if state.preset == OWN or not tasks:
        return replace(fresh, preset=OWN, task=state.task)
    name = next(iter(tasks))
    return replace(fresh, preset=name, task=tasks[name])


def _task_changed(state: CircuitsState, task: CircuitTask) -> CircuitsState:
    """A new task: what was asked for the old one (paths, costly runs but the weights) goes."""
    if task == state.task:
        return state
    return replace(
        state,
        task=task,
        paths=(),
        path=None,
        asked=state.asked & {"weights"},
        graph_head=None,
        threshold=None,
    )


def choose_preset(
    state: CircuitsState, name: str, tasks: Mapping[str, CircuitTask]
) -> CircuitsState:
    """Pick a preset (its prompts and tokens fill the task) or :data:`OWN` (the task stays)."""
    if name == OWN or name not in tasks:
        return replace(state, preset=OWN)
    return _task_changed(replace(state, preset=name), tasks[name])


def edit_task(state: CircuitsState, **fields: str) -> CircuitsState:
    """New text in one of the task's inputs (``clean``, ``corrupted``, ``answer``, ``wrong``)."""
    return _task_changed(state, replace(state.task, **fields))


def put_space_back(state: CircuitsState, field: Literal["answer", "wrong"]) -> CircuitsState:
    """The answer or wrong token with a leading space (the word as the model writes it)."""
    text = getattr(state.task, field)
    return edit_task(state, **{field: " " + text.lstrip()})


# --- what runs ------------------------------------------------------------------------------------


def should_run(state: CircuitsState, job: CostlyWork, seconds: float) -> bool:
    """Whether ``job`` runs now: asked for, or expected to take at most :data:`AUTO_S` s."""
    return job in state.asked or seconds <= AUTO_S


def ask(state: CircuitsState, job: CostlyWork) -> CircuitsState:
    return replace(state, asked=state.asked | {job})


def exact_on(state: CircuitsState, n_heads: int) -> bool:
    """Whether every head is patched exactly: as chosen, else for models of <= 48 heads."""
    return state.exact if state.exact is not None else n_heads <= 48


def atp_options(state: CircuitsState, edges_s: float) -> AtPOptions:
    """Attribution patching's options as they run: edge estimates when switched on, or when
    not chosen and expected to take at most :data:`AUTO_S` s (``edges_s``)."""
    on = state.edges_on if state.edges_on is not None else edges_s <= AUTO_S
    return replace(state.atp, edges=state.edges_mode if on else None)


def set_atp(state: CircuitsState, **changes: Any) -> CircuitsState:
    return replace(state, atp=replace(state.atp, **changes))


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


# --- path patching and the graph --------------------------------------------------------------


def default_receiver(dla: np.ndarray) -> Head:
    """The head (above layer 0) whose direct effect on LD is largest: where a circuit ends."""
    later = np.asarray(dla, dtype=np.float64).copy()
    later[0] = -np.inf
    if later.shape[0] < 2 or not np.isfinite(later).any():
        return Head(min(1, later.shape[0] - 1), 0)
    layer, index = np.unravel_index(int(np.nanargmax(later)), later.shape)
    return Head(int(layer), int(index))


def shown_path(state: CircuitsState, dla: np.ndarray) -> PathRequest:
    return state.path if state.path is not None else PathRequest(default_receiver(dla))


def choose_path(
    state: CircuitsState, request: PathRequest, n_layers: int, n_heads: int
) -> CircuitsState:
    """Show ``request`` (a receiver in layer 0 has no sender: moved to layer 1)."""
    head = request.receiver
    fitted = Head(min(max(head.layer, 1), n_layers - 1), min(max(head.index, 0), n_heads - 1))
    return replace(state, path=replace(request, receiver=fitted))


def ask_path(state: CircuitsState, request: PathRequest) -> CircuitsState:
    """Run ``request`` (remembered, newest last, at most :data:`MAX_PATHS`)."""
    kept = (*(r for r in state.paths if r != request), request)
    return replace(state, path=request, paths=kept[-MAX_PATHS:])


def path_wanted(state: CircuitsState, request: PathRequest, seconds: float) -> bool:
    return request in state.paths or seconds <= AUTO_S


def choose_source(state: CircuitsState, source: GraphSource) -> CircuitsState:
    """Another source of edges: a new default threshold and no picked node."""
    if source == state.graph_source:
        return state
    return replace(state, graph_source=source, threshold=None, graph_head=None)


def shown_source(state: CircuitsState, available: Sequence[GraphSource]) -> GraphSource | None:
    """The chosen source if it is available, else the first available one."""
    if state.graph_source in available:
        return state.graph_source
    return available[0] if available else None


def default_threshold(weights: Sequence[float], shown: int = TOP_EDGES) -> float:
    """A threshold that shows about ``shown`` edges: the ``shown``-th largest ``|weight|``."""
    sizes = sorted((abs(float(w)) for w in weights if np.isfinite(w) and w != 0), reverse=True)
    if not sizes:
        return 0.0
    return sizes[min(shown, len(sizes)) - 1]


def shown_threshold(state: CircuitsState, weights: Sequence[float]) -> float:
    """The chosen threshold within ``[0, max |weight|]``, else :func:`default_threshold`."""
    top = max((abs(float(w)) for w in weights), default=0.0)
    if state.threshold is None:
        return default_threshold(weights)
    return min(max(state.threshold, 0.0), top)


def pick_node(state: CircuitsState, label: object, n_layers: int, n_heads: int) -> CircuitsState:
    """A clicked node (its ``L.H``): picked when it is a head of the model, else ignored."""
    try:
        head = Head.parse(label)
    except ValueError:
        return state
    return replace(state, graph_head=head) if head.fits(n_layers, n_heads) else state


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


# --- the weights ------------------------------------------------------------------------------


def default_composition_receiver(composition: Composition, kind: Projection) -> Head:
    """The head the strongest ``kind`` composition goes into."""
    scores = getattr(composition, kind)
    if not np.isfinite(scores).any():
        return composition.head(0)
    flat = int(np.nanargmax(np.where(np.isfinite(scores), scores, -np.inf)))
    return composition.head(flat % scores.shape[1])


def edit(state: CircuitsState, **changes: object) -> CircuitsState:
    """Any other choice (tab, node, heads, kinds): replaced as given."""
    return replace(state, **changes)  # type: ignore[arg-type]
