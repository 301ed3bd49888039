"""Every page's link: the query string that opens a page as it was, read and written here only.

A link has two parts: the sidebar's (the model, its dtype and the prompt) and the page's, which
is the page's state value (:mod:`ui.state`). :func:`parse` reads a query string into a
:class:`Link` that holds every page's state, each page taking its own on its first visit;
:func:`query` writes the query string of one page's state, so every link on every page is built
by the one function from the value the page already keeps. ``parse(query(x)) == x`` for every
field a link carries; each state says which fields stay in the session (``IN_SESSION``: where
the window stands, what ran, what was asked for).

Garbage in a link becomes a note and the field's default, never an exception. A text longer
than :data:`MAX_LINK_TEXT` characters travels as the id under which the server's prompt store
keeps it: :func:`parse` is given the store's lookup, :func:`query` its saver. No Streamlit here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeVar, get_args

from models.attention.check import KernelDType
from models.capture.spans import Direction
from models.capture.views import Scope
from models.circuits.paths import MLPMode
from models.circuits.task import CircuitTask
from models.generate.policies import Policy
from models.generate.settings import GenerationSettings
from models.head import Head
from models.heads.atlas.metrics import METRIC_NAMES, MetricName
from models.heads.names import EXAMPLE_SCORES, RANKINGS
from models.heads.table import Thresholds
from models.model.forward import MAX_PROMPT_CHARS
from models.model.spec import DType
from models.model.weights import Projection
from ui.state import circuits as cs
from ui.state import classroom as cl
from ui.state import explorer as ex
from ui.state import generate as gs
from ui.state import heads as hs
from ui.state import scaling as sc
from ui.state.atlas import AtlasView
from ui.state.circuits import CircuitsState, PathRequest
from ui.state.classroom import ClassroomView
from ui.state.explorer import ExplorerView
from ui.state.generate import EvictionChoice, GenerateState
from ui.state.heads import HeadsView
from ui.state.kernel import KernelView
from ui.state.scaling import ScalingView
from ui.state.sidebar import DTYPES, NAMED
from viz.heatmap import ColourScale

MAX_LINK_TEXT = 2000  # longer texts travel as the ids the server keeps them under
Page = Literal[
    "explorer", "generate", "circuits", "atlas", "scaling", "kernel", "heads", "classroom"
]
PAGE_PATHS: dict[Page, str] = {
    "explorer": "",
    "generate": "generate",
    "circuits": "circuits",
    "atlas": "atlas",
    "scaling": "scaling",
    "kernel": "kernel",
    "heads": "heads",
    "classroom": "classroom",
}

SCALES: tuple[ColourScale, ...] = ("sqrt", "linear", "log")
RANGES: tuple[ex.ColourRange, ...] = get_args(ex.ColourRange)
SCOPES: tuple[Scope, ...] = ("head", "layer", "all")
DIRECTIONS: tuple[Direction, ...] = ("from", "to")
MODES: tuple[ex.Mode, ...] = get_args(ex.Mode)
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
Lookup = Callable[[str], str | None]  # a stored text by its id (None: not held here)
SaveText = Callable[[str], str]  # store a text, return its id
T = TypeVar("T", bound=str)
PageState = (
    ExplorerView
    | GenerateState
    | CircuitsState
    | AtlasView
    | ScalingView
    | KernelView
    | HeadsView
    | ClassroomView
)
KERNEL_DTYPES: tuple[KernelDType, ...] = get_args(KernelDType)


@dataclass(frozen=True)
class Shared:
    """The sidebar's part of every link: the model (a named model, a Hugging Face name, a path),
    the dtype it runs in, and the prompt (None: the link names none)."""

    model: str | None = None
    dtype: DType = "float32"
    prompt: str | None = None


@dataclass(frozen=True)
class Link:
    """What a URL opens: the sidebar's part and every page's state, with notes per page on what
    the link asked for that could not be read (``"sidebar"``: the shared part)."""

    shared: Shared = Shared()
    explorer: ExplorerView = field(default_factory=ExplorerView)
    generate: GenerateState = field(default_factory=GenerateState)
    circuits: CircuitsState = field(default_factory=CircuitsState)
    atlas: AtlasView = field(default_factory=AtlasView)
    scaling: ScalingView = field(default_factory=ScalingView)
    kernel: KernelView = field(default_factory=KernelView)
    heads: HeadsView = field(default_factory=HeadsView)
    classroom: ClassroomView = field(default_factory=ClassroomView)
    notes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# --- reading ------------------------------------------------------------------------------------


class Reader:
    """Typed reads of a query string; what cannot be read is noted and gives the default."""

    def __init__(self, params: Mapping[str, str], stored: Lookup) -> None:
        self.params, self.stored, self.notes = params, stored, list[str]()

    def has(self, *keys: str) -> bool:
        return any(key in self.params for key in keys)

    def _bad(self, key: str, why: str) -> None:
        self.notes.append(f"Ignored {key}={self.params[key]!r} in the link: {why}.")

    def text(self, key: str, id_key: str, what: str = "prompt") -> str | None:
        """A text given as itself (``key``) or by its stored id (``id_key``)."""
        if key in self.params:
            return str(self.params[key])
        pid = str(self.params.get(id_key) or "")
        if not pid:
            return None
        found = self.stored(pid)
        if found is None:
            self.notes.append(
                f"This link points to a stored {what} (id {pid[:16]}) that this server does not "
                "hold: it may come from another server or have expired. Paste the text to see it."
            )
        return found

    def whole(self, key: str, default: int | None, low: int | None = None) -> int | None:
        """A whole number (out of range is the page's to clamp, with its own note; ``low``:
        below it, the value is dropped here)."""
        if key not in self.params:
            return default
        try:
            value = int(str(self.params[key]).strip())
        except ValueError:
            self._bad(key, "not a whole number")
            return default
        if low is not None and value < low:
            self._bad(key, f"below {low}")
            return default
        return value

    def number(self, key: str, default: float | None) -> float | None:
        if key not in self.params:
            return default
        try:
            value = float(str(self.params[key]).strip())
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            self._bad(key, "not a number")
            return default
        return value

    def choice(self, key: str, options: Sequence[T], default: T) -> T:
        raw = str(self.params.get(key, "")).strip().lower()
        for option in options:
            if raw == option.lower():
                return option
        if key in self.params:
            self._bad(key, f"it is one of {', '.join(options)}")
        return default

    def flag(self, key: str, default: bool) -> bool:
        raw = str(self.params.get(key, "")).strip().lower()
        if raw in _TRUE or raw in _FALSE:
            return raw in _TRUE
        if key in self.params and raw:
            self._bad(key, "it is 1 or 0")
        return default

    def maybe_flag(self, key: str) -> bool | None:
        """A flag that may be left unset (None: the page decides)."""
        return self.flag(key, False) if self.has(key) and self.params[key] else None

    def head(self, key: str) -> Head | None:
        if not self.params.get(key):
            return None
        try:
            return Head.parse(self.params[key])
        except ValueError:
            self._bad(key, "a head is written layer.head, such as 3.1")
            return None

    def items(self, key: str, options: Sequence[T]) -> tuple[T, ...] | None:
        """A comma-separated list of options, in the options' order (None: not in the link)."""
        if key not in self.params:
            return None
        words = [w.strip().lower() for w in str(self.params[key]).split(",") if w.strip()]
        unknown = [w for w in words if w not in options]
        if unknown:
            self._bad(key, f"each item is one of {', '.join(options)}")
        return tuple(o for o in options if o in words)


def _span(read: Reader) -> tuple[int, int] | None:
    """``span=start-end``: token positions ``start`` to ``end``, both included."""
    raw = str(read.params.get("span") or "")
    if not raw:
        return None
    start, _, end = raw.partition("-")
    try:
        first, last = int(start), int(end)
    except ValueError:
        first, last = -1, -1
    if not 0 <= first < last:
        read._bad("span", "it is start-end, two positions with start before end")
        return None
    return first, last + 1


def _explorer(read: Reader) -> ExplorerView:
    layer, index = read.whole("layer", 0), read.whole("head", 0)
    mode = read.choice("mode", MODES, "single")
    prompt_b = read.text("b", "bid", "prompt B") if mode == "compare" else None
    return ExplorerView(
        head=Head(layer or 0, index or 0),
        token=read.whole("token", None),
        scope=read.choice("by", SCOPES, "head"),
        direction=read.choice("dir", DIRECTIONS, "from"),
        scale=read.choice("scale", SCALES, "sqrt"),
        colour_range=read.choice("range", RANGES, "unit"),
        pin_sinks=read.flag("pin", True),
        weighted=read.flag("weighted", False),
        mode=mode,
        prompt_b=prompt_b or "",
        words=read.flag("words", False),
        span=_span(read),
        rollout=read.flag("rollout", False),
    )


def _settings_params(s: GenerationSettings) -> dict[str, str]:
    return {
        "n": str(s.max_new_tokens),
        "chat": _on(s.chat),
        "decoding": s.decoding,
        "temp": repr(float(s.temperature)),
        "top_k": str(s.top_k or 0),
        "top_p": repr(float(s.top_p)),
        "seed": str(s.seed or 0),
    }


def _settings(read: Reader) -> GenerationSettings:
    """The generation's settings; what the link leaves out keeps the page's default."""
    given = {key: str(read.params[key]) for key in GEN_KEYS if read.has(key)}
    if not given:
        return gs.DEFAULT_SETTINGS
    params = {**_settings_params(gs.DEFAULT_SETTINGS), **given}
    settings, notes = GenerationSettings.from_params(params)
    settings, fitted = gs.fit_settings(settings)
    read.notes += notes + fitted
    return settings


def _generate(read: Reader) -> GenerateState:
    head = None
    if read.has("layer", "head"):
        head = Head(read.whole("layer", 0) or 0, read.whole("head", 0) or 0)
    evict = EvictionChoice(
        source=read.choice("evict", gs.TEXT_SOURCES, "passage"),
        pasted=read.text("etext", "etext_id", "text") or "",
        budgets=tuple(sorted({int(b) for b in _ints(read, "budgets")})),
        sinks=min(read.whole("sinks", 4, low=0) or 0, gs.MAX_SINKS),
        policies=read.items("policies", POLICIES_BOUNDED) or EvictionChoice().policies,
        max_tokens=read.whole("etokens", EvictionChoice().max_tokens, low=1) or 1,
    )
    return GenerateState(
        settings=_settings(read),
        # A link with the settings but no ``go`` (the older kind) asks for the generation too.
        pending=read.flag("go", read.has(*GEN_KEYS)),
        step=read.whole("step", None, low=0),
        head=head,
        eviction=evict,
    )


def _ints(read: Reader, key: str) -> list[int]:
    raw = [w.strip() for w in str(read.params.get(key, "")).split(",") if w.strip()]
    if not all(w.isdigit() and int(w) > 0 for w in raw):
        read._bad(key, "a list of whole numbers above 0, such as 64,128")
        return []
    return [int(w) for w in raw]


def _circuits(read: Reader) -> CircuitsState:
    texts = {f: read.text(f, f"{f}_id", "text") for f in cs.TASK_FIELDS}
    given = any(text is not None for text in texts.values())
    task = CircuitTask(**{f: text or "" for f, text in texts.items()})
    receiver = read.head("receiver")
    path = None
    if receiver is not None:
        path = PathRequest(
            receiver,
            read.choice("input", cs.INPUTS, "q"),
            read.choice("mlps", cs.MLP_MODES, "recomputed"),
        )
    inputs: tuple[Projection, ...] | None = read.items("inputs", cs.INPUTS)
    return CircuitsState(
        preset=str(read.params.get("preset") or (cs.OWN if given else "")),
        task=task,
        tab=read.choice("tab", cs.TABS, "patching"),
        exact=read.maybe_flag("exact"),
        position_head=read.head("poshead"),
        atp=cs.AtPOptions(
            qk_fix=read.flag("qkfix", True),
            grad_drop=read.flag("graddrop", False),
            verify_top=read.whole("verify", 0, low=0) or 0,
        ),
        edges_on=read.maybe_flag("edges"),
        edges_mode=read.choice("edgemode", MLP_MODES, "recomputed"),
        node=read.choice("node", cs.NODES, "z"),
        atp_head=read.head("atphead"),
        path=path,
        graph_source=read.choice("source", cs.GRAPH_SOURCES, "estimates")
        if read.has("source")
        else None,
        graph_inputs=cs.INPUTS if inputs is None else inputs,
        threshold=_threshold(read),
        graph_head=read.head("pick"),
        composition=read.choice("comp", cs.INPUTS, "q"),
        composition_receiver=read.head("compto"),
        weight_score=str(read.params.get("wscore") or CircuitsState().weight_score),
        twin=str(read.params.get("twin") or CircuitsState().twin),
    )


def _threshold(read: Reader) -> float | None:
    value = read.number("threshold", None)
    if value is not None and value < 0:
        read._bad("threshold", "below 0")
        return None
    return value


def _optional_metric(read: Reader, key: str, default: MetricName | None) -> MetricName | None:
    """An atlas quantity by name, or none where the link leaves it empty."""
    if key in read.params and not str(read.params[key]).strip():
        return None
    return read.choice(key, METRIC_NAMES, default) if default else _named(read, key)


def _named(read: Reader, key: str) -> MetricName | None:
    """A quantity by name with no default (None: not in the link or not a quantity)."""
    if key not in read.params:
        return None
    raw = str(read.params[key]).strip().lower()
    found = next((name for name in METRIC_NAMES if name == raw), None)
    if found is None:
        read._bad(key, f"it is one of {', '.join(METRIC_NAMES)}")
    return found


def _atlas(read: Reader) -> AtlasView:
    """The atlas's axes (``colour`` and ``size`` may be empty) and the open card's head, given
    as ``layer`` and ``head`` like the explorer's so a link opens the same head on either page."""
    x = read.choice("ax", METRIC_NAMES, AtlasView.x)
    y = read.choice("ay", METRIC_NAMES, AtlasView.y)
    colour = _optional_metric(read, "ac", AtlasView.colour)
    size = _optional_metric(read, "as", AtlasView.size)
    head = None
    if read.has("layer") and read.has("head"):
        layer, index = read.whole("layer", None, 0), read.whole("head", None, 0)
        head = None if layer is None or index is None else Head(layer, index)
    return AtlasView(x, y, colour, size, head)


def _linked_head(read: Reader) -> Head | None:
    """A head given as ``layer`` and ``head`` (both, or none)."""
    if not (read.has("layer") and read.has("head")):
        return None
    layer, index = read.whole("layer", None, 0), read.whole("head", None, 0)
    return None if layer is None or index is None else Head(layer, index)


def _scaling(read: Reader) -> ScalingView:
    """The sweep (``sweep``, ``lo``, ``hi``, ``points``), the head, the point looked at
    (``at``) and the synthetic seed; bounds are the page's to fit."""
    default = ScalingView()
    low = read.number("lo", default.low)
    high = read.number("hi", default.high)
    return ScalingView(
        axis=read.choice("sweep", sc.AXES, default.axis),
        low=default.low if low is None else low,
        high=default.high if high is None else high,
        points=read.whole("points", default.points, sc.MIN_POINTS) or default.points,
        head=_linked_head(read),
        pick=read.whole("at", None, 0),
        seed=read.whole("sseed", default.seed, 0) or 0,
    )


def _kernel(read: Reader) -> KernelView:
    """The kernel's dtype (``kdtype``) and the head compared."""
    return KernelView(read.choice("kdtype", KERNEL_DTYPES, "float32"), _linked_head(read))


def _heads(read: Reader) -> HeadsView:
    """The Head finder's corpus, repeated tokens, thresholds (``th_<score>``), top examples,
    ranking and pruning; numbers out of range are the page's to fit."""
    d = HeadsView()
    thresholds = {
        f.name: read.number(f"th_{f.name}", getattr(d.thresholds, f.name))
        for f in fields(d.thresholds)
    }
    pick = tuple(h for h in (_parsed_head(read, w) for w in _words(read, "drop")) if h is not None)
    budget = read.whole("budget", None, 1)
    return HeadsView(
        corpus=read.choice("corpus", hs.CORPUS_SOURCES, d.corpus),
        texts=read.whole("texts", d.texts, 1) or d.texts,
        max_tokens=read.whole("cap", d.max_tokens, 1) or d.max_tokens,
        span=read.whole("rspan", d.span, 1) or d.span,
        batch=read.whole("batch", d.batch, 1) or d.batch,
        seed=read.whole("rseed", d.seed, 0) or 0,
        thresholds=Thresholds(**{k: float(v) for k, v in thresholds.items() if v is not None}),
        example_score=read.choice("ex", EXAMPLE_SCORES, d.example_score),
        example_head=read.head("exhead"),
        ranking=read.choice("ranking", RANKINGS, "zero") if read.has("ranking") else None,
        method=read.choice("ablation", hs.ABLATIONS, d.method),
        budget=budget,
        ablate=read.maybe_flag("measure"),
        prune_mode=read.choice("prune", hs.PRUNE_MODES, d.prune_mode),
        prune_k=read.whole("k", None, 1),
        prune_groups=read.whole("groups", d.prune_groups, 1) or d.prune_groups,
        prune_pick=tuple(sorted(pick)),
        prune_dtype=read.choice("pdtype", DTYPES, d.prune_dtype),
    )


def _classroom(read: Reader) -> ClassroomView:
    """The open tab (``ctab``), the text size (``size``), the typed matrices (``mq``, ``mk``,
    ``mv``), the causal mask, and the model's head (``layer``, ``head``) with the tokens shown
    (``first``, ``shown``); numbers out of range are the page's to fit."""
    d = ClassroomView()
    return ClassroomView(
        tab=read.choice("ctab", cl.TABS, d.tab),
        text_size=read.choice("size", cl.TEXT_SIZES, d.text_size),
        q=read.text("mq", "mq_id", "matrix") or d.q,
        k=read.text("mk", "mk_id", "matrix") or d.k,
        v=read.text("mv", "mv_id", "matrix") or d.v,
        causal=read.flag("causal", d.causal),
        head=_linked_head(read) or d.head,
        start=read.whole("first", d.start, 0) or 0,
        width=read.whole("shown", None, 1),
    )


def _words(read: Reader, key: str) -> list[str]:
    return [w.strip() for w in str(read.params.get(key) or "").split(",") if w.strip()]


def _parsed_head(read: Reader, word: str) -> Head | None:
    try:
        return Head.parse(word)
    except ValueError:
        read.notes.append(f"Ignored {word!r} in the link's heads: a head is written as 3.1.")
        return None


def parse(params: Mapping[str, str], stored: Lookup) -> Link:
    """The view a query string asks for (see the module docstring)."""
    sidebar, explorer, generate, circuits, atlas, scaling, kernel, heads, classroom = (
        Reader(params, stored) for _ in range(9)
    )
    shared = Shared(
        model=str(params.get("model") or "") or None,
        dtype=sidebar.choice("dtype", DTYPES, "float32"),
        prompt=sidebar.text("prompt", "pid"),
    )
    return Link(
        shared,
        explorer=_explorer(explorer),
        generate=_generate(generate),
        circuits=_circuits(circuits),
        atlas=_atlas(atlas),
        scaling=_scaling(scaling),
        kernel=_kernel(kernel),
        heads=_heads(heads),
        classroom=_classroom(classroom),
        notes={
            "sidebar": tuple(sidebar.notes),
            "explorer": tuple(explorer.notes),
            "generate": tuple(generate.notes),
            "circuits": tuple(circuits.notes),
            "atlas": tuple(atlas.notes),
            "scaling": tuple(scaling.notes),
            "kernel": tuple(kernel.notes),
            "heads": tuple(heads.notes),
            "classroom": tuple(classroom.notes),
        },
    )


# --- writing ------------------------------------------------------------------------------------

GEN_KEYS = ("n", "chat", "decoding", "temp", "top_k", "top_p", "seed")
POLICIES_BOUNDED: tuple[Policy, ...] = tuple(p for p in get_args(Policy) if p != "full")
MLP_MODES: tuple[MLPMode, ...] = cs.MLP_MODES


def _on(value: bool) -> str:
    return "1" if value else "0"


class Writer:
    """A query string being written; long texts go to the store through ``keep``."""

    def __init__(self, keep: SaveText, limit: int) -> None:
        self.out: dict[str, str] = {}
        self.keep, self.limit = keep, limit

    def text(self, key: str, id_key: str, text: str | None) -> None:
        """A text as itself up to the limit, else as its stored id; a text too long for the
        store is left out (the page that opens the link says so)."""
        if text is None:
            return
        if len(text) <= self.limit or not text.strip():
            self.out[key] = text
        elif len(text) <= MAX_PROMPT_CHARS:
            self.out[id_key] = self.keep(text)

    def put(self, **values: str | None) -> None:
        self.out.update({k: v for k, v in values.items() if v is not None})


def _write_explorer(w: Writer, view: ExplorerView) -> None:
    w.put(layer=str(view.head.layer), head=str(view.head.index))
    w.put(token=None if view.token is None else str(view.token))
    w.put(scale=view.scale, range=view.colour_range, weighted=_on(view.weighted))
    w.put(by=view.scope, dir=view.direction, rollout=_on(view.rollout), pin=_on(view.pin_sinks))
    w.put(span=None if view.span is None else f"{view.span[0]}-{view.span[1] - 1}")
    w.put(words=_on(view.words), mode=view.mode)
    if view.mode == "compare":
        w.text("b", "bid", view.prompt_b)


def _write_generate(w: Writer, state: GenerateState) -> None:
    w.put(**_settings_params(state.settings))
    w.put(go=_on(state.pending or state.request is not None))
    w.put(step=None if state.step is None else str(state.step))
    if state.head is not None:
        w.put(layer=str(state.head.layer), head=str(state.head.index))
    e = state.eviction
    w.put(evict=e.source, sinks=str(e.sinks), etokens=str(e.max_tokens))
    w.put(policies=",".join(e.policies), budgets=",".join(map(str, e.budgets)) or None)
    if e.source == "pasted":
        w.text("etext", "etext_id", e.pasted)


def _head(head: Head | None) -> str | None:
    return None if head is None else str(head)


def _maybe(value: bool | None) -> str | None:
    return None if value is None else _on(value)


def _write_circuits(w: Writer, state: CircuitsState) -> None:
    w.put(preset=state.preset or None, tab=state.tab)
    for name in cs.TASK_FIELDS:
        w.text(name, f"{name}_id", getattr(state.task, name) or None)
    w.put(exact=_maybe(state.exact), poshead=_head(state.position_head))
    w.put(qkfix=_on(state.atp.qk_fix), graddrop=_on(state.atp.grad_drop))
    w.put(verify=str(state.atp.verify_top), edges=_maybe(state.edges_on))
    w.put(edgemode=state.edges_mode, node=state.node, atphead=_head(state.atp_head))
    if state.path is not None:
        w.put(receiver=str(state.path.receiver), input=state.path.input, mlps=state.path.mlps)
    w.put(source=state.graph_source, inputs=",".join(state.graph_inputs))
    w.put(threshold=None if state.threshold is None else repr(state.threshold))
    w.put(pick=_head(state.graph_head), comp=state.composition)
    w.put(compto=_head(state.composition_receiver), wscore=state.weight_score, twin=state.twin)


def _write_atlas(w: Writer, view: AtlasView) -> None:
    w.put(ax=view.x, ay=view.y, ac=view.colour or "", **{"as": view.size or ""})
    if view.head is not None:
        w.put(layer=str(view.head.layer), head=str(view.head.index))


def _write_scaling(w: Writer, view: ScalingView) -> None:
    w.put(sweep=view.axis, lo=repr(view.low), hi=repr(view.high), points=str(view.points))
    if view.head is not None:
        w.put(layer=str(view.head.layer), head=str(view.head.index))
    w.put(at=None if view.pick is None else str(view.pick))
    w.put(sseed=str(view.seed))


def _write_kernel(w: Writer, view: KernelView) -> None:
    w.put(kdtype=view.dtype)
    if view.head is not None:
        w.put(layer=str(view.head.layer), head=str(view.head.index))


def _write_heads(w: Writer, view: HeadsView) -> None:
    w.put(corpus=view.corpus, texts=str(view.texts), cap=str(view.max_tokens))
    w.put(rspan=str(view.span), batch=str(view.batch), rseed=str(view.seed))
    limits = view.thresholds
    w.put(**{f"th_{f.name}": repr(getattr(limits, f.name)) for f in fields(limits)})
    w.put(ex=view.example_score, exhead=_head(view.example_head), ranking=view.ranking)
    w.put(ablation=view.method, budget=None if view.budget is None else str(view.budget))
    w.put(measure=_maybe(view.ablate), prune=view.prune_mode)
    w.put(k=None if view.prune_k is None else str(view.prune_k), groups=str(view.prune_groups))
    w.put(drop=",".join(map(str, view.prune_pick)) or None, pdtype=view.prune_dtype)


def _write_classroom(w: Writer, view: ClassroomView) -> None:
    w.put(ctab=view.tab, size=view.text_size, causal=_on(view.causal))
    for key, text in (("mq", view.q), ("mk", view.k), ("mv", view.v)):
        w.text(key, f"{key}_id", text)
    w.put(layer=str(view.head.layer), head=str(view.head.index), first=str(view.start))
    w.put(shown=None if view.width is None else str(view.width))


_WRITERS: tuple[tuple[type, Page, Callable[[Writer, Any], None]], ...] = (
    (ExplorerView, "explorer", _write_explorer),
    (GenerateState, "generate", _write_generate),
    (CircuitsState, "circuits", _write_circuits),
    (AtlasView, "atlas", _write_atlas),
    (ScalingView, "scaling", _write_scaling),
    (KernelView, "kernel", _write_kernel),
    (HeadsView, "heads", _write_heads),
    (ClassroomView, "classroom", _write_classroom),
)


def _entry(state: PageState) -> tuple[Page, Callable[[Writer, Any], None]]:
    return next((page, write) for kind, page, write in _WRITERS if isinstance(state, kind))


def page_of(state: PageState) -> Page:
    return _entry(state)[0]


def query(
    shared: Shared, state: PageState, keep: SaveText, limit: int = MAX_LINK_TEXT
) -> dict[str, str]:
    """The query string that opens ``state``'s page as it is, on ``shared``'s model, dtype and
    prompt. ``limit``: texts longer than this travel as stored ids (a table of many links
    asks for a small one, so a long prompt is not copied into every row)."""
    w = Writer(keep, limit)
    if shared.model:
        w.put(model=shared.model)
    w.put(dtype=shared.dtype)
    w.text("prompt", "pid", shared.prompt)
    _entry(state)[1](w, state)
    return w.out


def in_link(state: type) -> tuple[str, ...]:
    """The fields of a page's state that its link carries (all but ``IN_SESSION``)."""
    kept: frozenset[str] = getattr(state, "IN_SESSION", frozenset())
    return tuple(f.name for f in fields(state) if f.name not in kept)


def model_name(source: str, name: str) -> str:
    """What a link's ``model=`` says for the sidebar's source and typed name."""
    return source if source in NAMED else name.strip()
