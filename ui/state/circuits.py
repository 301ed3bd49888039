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
from typing import ClassVar, Literal, get_args

import numpy as np

from models.circuits.paths import MLPMode
from models.circuits.task import CircuitTask
from models.head import Head
from models.model.weights import Projection
from ui.state.circuits_derived import default_receiver, default_threshold

OWN = "Your own prompts"
AUTO_S = 15.0  # work estimated to take at most this long runs without being asked
MAX_PATHS = 16  # path patching requests remembered (the graph draws the finished ones)

Tab = Literal["patching", "atp", "paths", "weights"]
TABS: tuple[Tab, ...] = get_args(Tab)
Node = Literal["z", "q", "k", "v"]
NODES: tuple[Node, ...] = get_args(Node)
GraphSource = Literal["estimates", "paths", "weights"]
GRAPH_SOURCES: tuple[GraphSource, ...] = get_args(GraphSource)
INPUTS: tuple[Projection, ...] = get_args(Projection)
MLP_MODES: tuple[MLPMode, ...] = get_args(MLPMode)
TaskField = Literal["clean", "corrupted", "answer", "wrong"]
TASK_FIELDS: tuple[TaskField, ...] = get_args(TaskField)
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
        threshold: the graph's smallest |weight| (None: about twenty edges).
        graph_head: the node picked in the graph.
        composition: the composition kind the weights section shows.
        composition_receiver: its receiver (None: the most composed-into head).
        weight_score: the per-head weight score shown.
        twin: the weight score against data pair shown.
        asked: costly work the visitor asked for.

    Its link carries every field but the model it was made for, the path patching asked for and
    the costly work asked for: a link shows the same choices and runs only what is cheap.
    """

    IN_SESSION: ClassVar[frozenset[str]] = frozenset({"model", "paths", "asked"})

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
    if state.model is None:  # a new session, or a link: its choices stay
        return replace(_fit_preset(state, tasks), model=model)
    fresh = CircuitsState(model=model, tab=state.tab)
    if state.preset == OWN or not tasks:
        return replace(fresh, preset=OWN, task=state.task)
    name = next(iter(tasks))
    return replace(fresh, preset=name, task=tasks[name])


def _fit_preset(state: CircuitsState, tasks: Mapping[str, CircuitTask]) -> CircuitsState:
    """A preset that exists with its own task; a task edited or with no preset is the
    visitor's own; no task at all opens the first preset."""
    if state.preset in tasks and state.task in (EMPTY, tasks[state.preset]):
        return replace(state, task=tasks[state.preset])
    if state.task != EMPTY or state.preset == OWN or not tasks:
        return replace(state, preset=OWN)
    name = next(iter(tasks))
    return replace(state, preset=name, task=tasks[name])


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


def edit_task(state: CircuitsState, field: TaskField, text: str) -> CircuitsState:
    """New text in one of the task's inputs."""
    return _task_changed(state, replace(state.task, **{field: str(text)}))


def put_space_back(state: CircuitsState, field: Literal["answer", "wrong"]) -> CircuitsState:
    """The answer or wrong token with a leading space (the word as the model writes it)."""
    text = getattr(state.task, field)
    return edit_task(state, field, " " + text.lstrip())


def choose_tab(state: CircuitsState, tab: Tab) -> CircuitsState:
    return replace(state, tab=tab)


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


def set_exact(state: CircuitsState, on: bool) -> CircuitsState:
    """Patch every head exactly (on), or estimate only (off)."""
    return replace(state, exact=bool(on))


def choose_position_head(state: CircuitsState, head: Head) -> CircuitsState:
    """The head patched position by position."""
    return replace(state, position_head=head)


def set_qk_fix(state: CircuitsState, on: bool) -> CircuitsState:
    return replace(state, atp=replace(state.atp, qk_fix=bool(on)))


def set_grad_drop(state: CircuitsState, on: bool) -> CircuitsState:
    return replace(state, atp=replace(state.atp, grad_drop=bool(on)))


def set_verify_top(state: CircuitsState, n_heads: int) -> CircuitsState:
    """How many of the top heads exact patching checks (0: none)."""
    return replace(state, atp=replace(state.atp, verify_top=max(int(n_heads), 0)))


def set_edges(state: CircuitsState, on: bool) -> CircuitsState:
    """Estimate every edge too (on) or not (off)."""
    return replace(state, edges_on=bool(on))


def choose_edges_mode(state: CircuitsState, mode: MLPMode) -> CircuitsState:
    return replace(state, edges_mode=mode)


def choose_node(state: CircuitsState, node: Node) -> CircuitsState:
    """Which AtP* estimate the heatmap shows."""
    return replace(state, node=node)


def choose_atp_head(state: CircuitsState, head: Head) -> CircuitsState:
    """The head whose per-position estimate is shown."""
    return replace(state, atp_head=head)


# --- path patching and the graph --------------------------------------------------------------


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


def shown_threshold(state: CircuitsState, weights: Sequence[float]) -> float:
    """The chosen threshold within ``[0, max |weight|]``, else :func:`default_threshold`."""
    top = max((abs(float(w)) for w in weights), default=0.0)
    if state.threshold is None:
        return default_threshold(weights)
    return min(max(state.threshold, 0.0), top)


def set_threshold(state: CircuitsState, threshold: float) -> CircuitsState:
    """The graph's smallest |weight|."""
    return replace(state, threshold=float(threshold))


def choose_graph_inputs(state: CircuitsState, inputs: Sequence[Projection]) -> CircuitsState:
    """Which receiver inputs the graph draws (in q, k, v order); a new default threshold."""
    chosen = tuple(kind for kind in INPUTS if kind in inputs)
    return replace(state, graph_inputs=chosen, threshold=None)


def choose_graph_head(state: CircuitsState, head: Head) -> CircuitsState:
    """The node looked at below the graph."""
    return replace(state, graph_head=head)


def pick_node(state: CircuitsState, label: object, n_layers: int, n_heads: int) -> CircuitsState:
    """A clicked node (its ``L.H``): picked when it is a head of the model, else ignored."""
    try:
        head = Head.parse(label)
    except ValueError:
        return state
    return replace(state, graph_head=head) if head.fits(n_layers, n_heads) else state


# --- the weights ------------------------------------------------------------------------------


def choose_weight_score(state: CircuitsState, score: str) -> CircuitsState:
    """The per-head weight score shown."""
    return replace(state, weight_score=str(score))


def choose_composition(state: CircuitsState, kind: Projection) -> CircuitsState:
    """The composition kind shown; its receiver goes back to the most composed-into head."""
    return replace(state, composition=kind, composition_receiver=None)


def choose_composition_receiver(state: CircuitsState, head: Head) -> CircuitsState:
    return replace(state, composition_receiver=head)


def choose_twin(state: CircuitsState, twin: str) -> CircuitsState:
    """The weight score against data pair shown."""
    return replace(state, twin=str(twin))
