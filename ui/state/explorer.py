"""The explorer's view as one frozen value, and every way it changes, as pure functions.

:class:`ExplorerView` is what the explorer shows: the head, the selected query token, the detail
window's first row and column, the colour and scope options, the mode (one prompt, or prompt A
against prompt B), the word view, a selected span of tokens and the rollout colouring, and what
the visitor asked the page to work out (a long comparison, the *Why here?* split). The page
keeps one in the session and replaces it through the transitions below; widgets only display it.
Nothing here knows Streamlit, so every rule is unit-tested directly: a new prompt opens on its
last token with the window on where that token attends; a clicked token brings its row and the
keys it reads into the window; an overview click centres the window; out-of-range values are
clamped.

Positions in the view are always token positions of prompt A, whatever is shown: the word view
and compare mode map them onto words and onto aligned positions
(:func:`models.capture.words.unit_range`, :func:`aligned_range`), so switching either on or off
never moves the window.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

from models.capture.spans import Direction
from models.capture.views import Scope
from models.capture.words import Words
from models.head import Head
from ui.runtime.job_keys import CompareKey
from viz.heatmap import ColourScale

WINDOW = 160
# The colour range: 0 to 1, or this view's largest weight, with or without key 0 (a sink
# holding most of every row would otherwise leave the rest of the pattern pale).
ColourRange = Literal["unit", "view", "rest"]
Mode = Literal["single", "compare"]
# The key a query attends to most (besides key 0) for a head: supplied by the page from the run.
Strongest = Callable[[Head, int], int]


@dataclass(frozen=True)
class RunShape:
    """What the view must fit: the model's layers and heads, the prompt's tokens, and which
    prompt it is (a new ``run_id`` is a new prompt). ``n_heads`` is the widest layer's head
    count; ``layer_heads`` each layer's, where they differ (a linear-attention layer may have
    more value heads than the softmax layers have heads)."""

    n_layers: int
    n_heads: int
    n_tokens: int
    run_id: object = None
    layer_heads: tuple[int, ...] = ()

    def heads_in(self, layer: int) -> int:
        """How many heads layer ``layer`` has."""
        return self.layer_heads[layer] if self.layer_heads else self.n_heads

    @property
    def long(self) -> bool:
        """Whether the heatmap is a window onto a larger pattern."""
        return self.n_tokens > WINDOW

    @property
    def last_start(self) -> int:
        return max(self.n_tokens - WINDOW, 0)


@dataclass(frozen=True)
class ExplorerView:
    """What the explorer shows (see the module docstring).

    Its link carries every field but where the detail window stands (``row0``, ``col0``: a link
    opens it on the selected token and where that token attends), which run it was fitted
    to (``run_id``) and what the visitor asked to be worked out: the comparisons started by
    hand (``compare_asked``), the head *Why here?* was asked for (``why_asked``) and the key
    position it explains (``why_key``, typed or clicked).
    """

    IN_SESSION: ClassVar[frozenset[str]] = frozenset(
        {"row0", "col0", "run_id", "compare_asked", "why_asked", "why_key"}
    )
    head: Head = Head(0, 0)  # noqa: RUF009 - a Head is immutable
    token: int | None = None
    row0: int = 0
    col0: int = 0
    run_id: object = None
    scope: Scope = "head"
    direction: Direction = "from"
    scale: ColourScale = "sqrt"
    colour_range: ColourRange = "unit"
    pin_sinks: bool = True
    weighted: bool = False
    mode: Mode = "single"
    prompt_b: str = ""
    words: bool = False
    span: tuple[int, int] | None = None  # token positions [start, stop) selected in the strip
    rollout: bool = False
    compare_asked: frozenset[CompareKey] = frozenset()
    why_asked: Head | None = None
    why_key: int = 0

    @property
    def skip_first(self) -> bool:
        """Whether key 0 is left out of the colour range."""
        return self.colour_range == "rest"

    @property
    def query(self) -> int:
        return 0 if self.token is None else self.token

    def rows(self, shape: RunShape) -> range:
        """Query positions in the detail window."""
        start = self.row0 if shape.long else 0
        return range(start, min(start + WINDOW, shape.n_tokens))

    def cols(self, shape: RunShape) -> range:
        """Key positions in the detail window."""
        start = self.col0 if shape.long else 0
        return range(start, min(start + WINDOW, shape.n_tokens))


def _start(centre: int, shape: RunShape) -> int:
    """The first position of a window centred on ``centre``, inside the prompt."""
    return min(max(centre - WINDOW // 2, 0), shape.last_start)


def clamp(view: ExplorerView, shape: RunShape) -> tuple[ExplorerView, list[str]]:
    """``view`` inside ``shape``, with a note for each value that had to move."""
    notes: list[str] = []

    def fit(name: str, value: int, size: int) -> int:
        if 0 <= value < size:
            return value
        fixed = min(max(value, 0), size - 1)
        notes.append(
            f"The link asked for {name} {value}, which does not exist here; showing "
            f"{name} {fixed} (valid: 0 to {size - 1})."
        )
        return fixed

    layer = fit("layer", view.head.layer, shape.n_layers)
    index = fit("head", view.head.index, shape.heads_in(layer))
    token = None if view.token is None else fit("token", view.token, shape.n_tokens)
    last = shape.last_start
    span = view.span if view.span is not None and view.span[1] <= shape.n_tokens else None
    return replace(
        view,
        head=Head(layer, index),
        token=token,
        span=span,
        row0=min(max(view.row0, 0), last),
        col0=min(max(view.col0, 0), last),
    ), notes


def follow(view: ExplorerView, shape: RunShape, strongest: Strongest) -> ExplorerView:
    """Bring the selected query's row, and the key it attends to most, into the window (the
    selected token's own column when the view shows which tokens attend to it).

    Windows that already show them stay put, so a click never moves what is on screen for
    nothing; on a short prompt the window is the whole pattern and nothing moves.
    """
    if not shape.long or view.token is None:
        return view
    row0, col0 = view.row0, view.col0
    if not row0 <= view.token < row0 + WINDOW:
        row0 = _start(view.token, shape)
    key = view.token if view.direction == "to" else strongest(view.head, view.token)
    if not col0 <= key < col0 + WINDOW:
        col0 = _start(key, shape)
    return replace(view, row0=row0, col0=col0)


def for_run(
    view: ExplorerView, shape: RunShape, strongest: Strongest
) -> tuple[ExplorerView, list[str]]:
    """The view for a run: kept for the same prompt, reset to its last token for a new one.

    A new prompt's query token moves to its last position (the one that has read the whole
    prompt) and the window opens on where it attends, so a stripe a thousand tokens back is on
    screen from the start; a link's token, when given, is kept.
    """
    fresh = view.run_id != shape.run_id
    if fresh and view.run_id is not None:
        view = replace(view, token=None, span=None)
    if view.token is None:
        view = replace(view, token=shape.n_tokens - 1)
    view, notes = clamp(view, shape)
    view = replace(view, run_id=shape.run_id)
    if fresh:
        view = follow(replace(view, row0=0, col0=0), shape, strongest)
    return view, notes


def choose_head(
    view: ExplorerView, head: Head, shape: RunShape, strongest: Strongest
) -> ExplorerView:
    """Open ``head``; the window follows where the selected query attends in it."""
    view, _ = clamp(replace(view, head=head), shape)
    return follow(view, shape, strongest)


def choose_token(
    view: ExplorerView, token: int, shape: RunShape, strongest: Strongest
) -> ExplorerView:
    """Select query ``token`` (ending any span); the window follows its row and the key it
    attends to most."""
    view, _ = clamp(replace(view, token=token, span=None), shape)
    return follow(view, shape, strongest)


def choose_span(
    view: ExplorerView, start: int, stop: int, shape: RunShape, strongest: Strongest
) -> ExplorerView:
    """Select the tokens ``start`` to ``stop - 1`` (a drag or shift-click in the strip; the
    bounds may come in either order); a span of one token is a plain selection of it. The first
    token of the span becomes the selected query."""
    lo, hi = sorted((start, stop))
    lo, hi = min(max(lo, 0), shape.n_tokens - 1), min(max(hi, lo + 1), shape.n_tokens)
    view = choose_token(view, lo, shape, strongest)
    return view if hi - lo <= 1 else replace(view, span=(lo, hi))


def centre_on(view: ExplorerView, shape: RunShape, query: int, key: int) -> ExplorerView:
    """Select query ``query`` (ending any span) with the window centred on it and on ``key``
    (where two prompts differ most, say)."""
    view, _ = clamp(replace(view, token=query, span=None), shape)
    return pick_overview(view, shape, query, query, key, key)


def set_mode(view: ExplorerView, mode: Mode) -> ExplorerView:
    """One prompt, or prompt A against prompt B (the window and head stay)."""
    return replace(view, mode=mode)


def set_prompt_b(view: ExplorerView, text: str) -> ExplorerView:
    """Prompt B as typed (kept while the visitor is on another page)."""
    return replace(view, prompt_b=text)


def set_words(view: ExplorerView, on: bool) -> ExplorerView:
    """Word view on or off; positions, the window and any span stay (they are tokens)."""
    return replace(view, words=on)


def selection(view: ExplorerView) -> tuple[int, int]:
    """The selected token positions ``[start, stop)``: the span, or the one query token."""
    return view.span if view.span is not None else (view.query, view.query + 1)


def unit_of(token: int, words: Words | None) -> int:
    """The unit shown for a token position: itself, or its word."""
    return token if words is None else words.word_of(token)


def aligned_range(positions: Sequence[float], units: range) -> range:
    """The aligned indices whose prompt-A unit lies in ``units``.

    Args:
        positions: the prompt-A unit of every aligned index, ascending (the unaligned key bin
            stands just after the aligned key before it).
        units: a window of prompt-A units.
    """
    return range(bisect_left(positions, units.start), bisect_left(positions, units.stop))


def aligned_index(positions: Sequence[float], unit: int) -> int | None:
    """The aligned index of prompt-A unit ``unit``; None when it is not aligned with B."""
    at = bisect_left(positions, unit)
    return at if at < len(positions) and positions[at] == unit else None


def set_direction(
    view: ExplorerView, direction: Direction, shape: RunShape, strongest: Strongest
) -> ExplorerView:
    """Show what the selected token attends to, or which tokens attend to it; the window
    follows its row, or its column."""
    return follow(replace(view, direction=direction), shape, strongest)


def jump_to_strongest(view: ExplorerView, shape: RunShape, strongest: Strongest) -> ExplorerView:
    """Centre the key window on where the selected query attends most (besides key 0)."""
    if not shape.long:
        return view
    key = strongest(view.head, view.query)
    return follow(replace(view, col0=_start(key, shape)), shape, strongest)


def pick_overview(
    view: ExplorerView, shape: RunShape, q0: int, q1: int, k0: int, k1: int
) -> ExplorerView:
    """A click (a tiny box) centres the window there; a drag starts it at the box's corner
    (centred on the box when the box is wider than the window)."""
    small = q1 - q0 < 4 and k1 - k0 < 4
    row0 = (
        _start((q0 + q1) // 2, shape)
        if small or q1 - q0 > WINDOW
        else min(max(q0, 0), shape.last_start)
    )
    col0 = (
        _start((k0 + k1) // 2, shape)
        if small or k1 - k0 > WINDOW
        else min(max(k0, 0), shape.last_start)
    )
    return replace(view, row0=row0, col0=col0)


def ask_compare(view: ExplorerView, key: CompareKey) -> ExplorerView:
    """The visitor asked for the comparison ``key`` (one too long to start by itself)."""
    return replace(view, compare_asked=view.compare_asked | {key})


def ask_why(view: ExplorerView, head: Head) -> ExplorerView:
    """The visitor asked *Why here?* for ``head`` (its panel opens and splits the score)."""
    return replace(view, why_asked=head)


def choose_why_key(view: ExplorerView, key: int) -> ExplorerView:
    """The key position typed for the *Why here?* panel (kept within the prompt by
    :func:`why_key`)."""
    return replace(view, why_key=key)


def pick_why_cell(view: ExplorerView, query: int, key: int) -> ExplorerView:
    """A click on a cell of the detail heatmap: its row becomes the selected token (a selected
    span is dropped), its column the key the panel explains, and the panel opens on the head
    shown."""
    return replace(view, token=query, span=None, why_key=key, why_asked=view.head)


def why_key(view: ExplorerView, n_tokens: int) -> int:
    """The key position the *Why here?* panel explains, within a prompt of ``n_tokens``."""
    return min(max(view.why_key, 0), n_tokens - 1)
