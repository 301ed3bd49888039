"""The Classroom page's state as one frozen value: the open tab, the text size, the typed
matrices and the window on the loaded model's head. Its link is read and written in
:mod:`ui.links`, so a teacher can hand out the exact example on the screen. No Streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Literal

from models.classroom.steps import EXAMPLES
from models.head import Head

Lesson = Literal["steps", "model", "sharing", "cost", "positions", "failures"]
TextSize = Literal["normal", "large", "larger"]
TAB_LABELS: dict[Lesson, str] = {
    "steps": "Step by step",
    "model": "Inside the model",
    "sharing": "MHA · GQA · MQA",
    "cost": "Cost",
    "positions": "Positions",
    "failures": "Failure modes",
}
TABS: tuple[Lesson, ...] = tuple(TAB_LABELS)
TEXT_SIZES: tuple[TextSize, ...] = ("normal", "large", "larger")
SHOWN_TOKENS = 8  # the most tokens of the model's head shown at once
FIRST_HEAD = Head(0, 0)


@dataclass(frozen=True)
class ClassroomView:
    """What the Classroom shows. ``q``, ``k`` and ``v`` are the matrices as typed (rows by ``;``
    or new lines, numbers by commas; checked where they are used, so a half-typed matrix is
    kept as it is); ``head``, ``start`` and ``width`` choose the loaded model's head and the
    tokens of it shown (``width`` None: as many as fit). Its link carries every field."""

    IN_SESSION: ClassVar[frozenset[str]] = frozenset()

    tab: Lesson = "steps"
    text_size: TextSize = "normal"
    q: str = EXAMPLES["A"]["q"]
    k: str = EXAMPLES["A"]["k"]
    v: str = EXAMPLES["A"]["v"]
    causal: bool = False
    head: Head = FIRST_HEAD
    start: int = 0
    width: int | None = None


def open_tab(view: ClassroomView, tab: Lesson) -> ClassroomView:
    return replace(view, tab=tab)


def with_text_size(view: ClassroomView, size: TextSize) -> ClassroomView:
    return replace(view, text_size=size)


def with_example(view: ClassroomView, name: str) -> ClassroomView:
    """The worked example ``name`` (``A`` or ``B``) in the three matrices."""
    found = EXAMPLES[name]
    return replace(view, q=found["q"], k=found["k"], v=found["v"])


def with_matrix(view: ClassroomView, name: Literal["q", "k", "v"], text: str) -> ClassroomView:
    """Matrix ``name`` as typed."""
    if name == "q":
        return replace(view, q=text)
    return replace(view, k=text) if name == "k" else replace(view, v=text)


def with_causal(view: ClassroomView, causal: bool) -> ClassroomView:
    return replace(view, causal=causal)


def with_layer(view: ClassroomView, layer: int) -> ClassroomView:
    """Another layer; the head's index stays (the page fits it to the model)."""
    return replace(view, head=Head(layer, view.head.index))


def with_head(view: ClassroomView, index: int) -> ClassroomView:
    return replace(view, head=Head(view.head.layer, index))


def with_start(view: ClassroomView, start: int) -> ClassroomView:
    """The first token shown; the width stays."""
    return replace(view, start=start)


def with_width(view: ClassroomView, width: int) -> ClassroomView:
    """How many tokens are shown; the first stays (the page fits it to the prompt)."""
    return replace(view, width=width)


def fit(view: ClassroomView, n_layers: int, n_heads: int, n_tokens: int) -> ClassroomView:
    """``view`` with its head and window inside what this model and prompt have: the head
    clamped to the model, at most :data:`SHOWN_TOKENS` tokens, the window inside the prompt."""
    most = max(1, min(SHOWN_TOKENS, n_tokens))
    width = most if view.width is None else min(max(view.width, 1), most)
    head = Head(
        min(max(view.head.layer, 0), n_layers - 1), min(max(view.head.index, 0), n_heads - 1)
    )
    start = min(max(view.start, 0), max(n_tokens - width, 0))
    return replace(view, head=head, start=start, width=width)
