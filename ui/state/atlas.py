"""The Atlas page's state as one frozen value, and every way it changes: the corpus size, the
scatter's axes and the selected head. Its link is read and written in :mod:`ui.links`. No
Streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from models.head import Head
from models.heads.atlas.metrics import METRIC_NAMES, METRICS, MetricName


@dataclass(frozen=True)
class AtlasView:
    """What the scatter shows and which head's card is open (None: no card). Its link carries
    every field but the session's own: how many texts and tokens per text the atlas reads
    (``texts``, ``max_tokens``; None until :func:`fit_corpus` sets them) and whether the
    link's notes were shown (``notes_shown``)."""

    IN_SESSION: ClassVar[frozenset[str]] = frozenset({"texts", "max_tokens", "notes_shown"})

    x: MetricName = "entropy"
    y: MetricName = "previous_token"
    colour: MetricName | None = "induction"
    size: MetricName | None = None
    head: Head | None = None
    texts: int | None = None
    max_tokens: int | None = None
    notes_shown: bool = False

    def columns(self) -> tuple[str, str, str | None, str | None]:
        """The atlas table's columns of x, y, colour and size."""
        return self.x, self.y, self.colour, self.size


def clamp(view: AtlasView, n_layers: int, n_heads: int) -> tuple[AtlasView, list[str]]:
    """Drop a selected head the model does not have, with a note."""
    if view.head is None or view.head.fits(n_layers, n_heads):
        return view, []
    note = f"Head {view.head} is not in this model ({n_layers} layers x {n_heads} heads)."
    return replace(view, head=None), [note]


DEFAULT_TEXTS, DEFAULT_TOKENS, MIN_TOKENS = 24, 256, 8


def fit_corpus(view: AtlasView, n_texts: int, n_ctx: int) -> AtlasView:
    """``view`` reading a number of texts within the ``n_texts`` the corpus holds and a number
    of tokens per text within ``[8, n_ctx]`` (24 and 256 until the visitor picks others); a
    number cut to fit stays cut."""
    texts = DEFAULT_TEXTS if view.texts is None else view.texts
    tokens = DEFAULT_TOKENS if view.max_tokens is None else view.max_tokens
    return replace(
        view,
        texts=min(max(texts, 1), n_texts),
        max_tokens=min(max(tokens, MIN_TOKENS), n_ctx),
    )


def with_texts(view: AtlasView, texts: int) -> AtlasView:
    """``view`` reading the first ``texts`` texts of the corpus."""
    return replace(view, texts=int(texts))


def with_max_tokens(view: AtlasView, max_tokens: int) -> AtlasView:
    """``view`` reading at most ``max_tokens`` tokens of each text."""
    return replace(view, max_tokens=int(max_tokens))


def noted(view: AtlasView) -> AtlasView:
    """``view`` once its link's notes were shown (they are shown once)."""
    return replace(view, notes_shown=True)


def select(view: AtlasView, head: Head | None) -> AtlasView:
    """Open ``head``'s card (None closes it)."""
    return replace(view, head=head)


def with_axes(
    view: AtlasView,
    x: MetricName,
    y: MetricName,
    colour: MetricName | None,
    size: MetricName | None,
) -> AtlasView:
    """``view`` showing other quantities; the selected head stays."""
    return replace(view, x=x, y=y, colour=colour, size=size)


def axis_label(name: str | None) -> str:
    """The words of a metric for a picker (``none`` for an empty colour or size)."""
    if name is None:
        return "none"
    info = next(METRICS[m] for m in METRIC_NAMES if m == name)
    return f"{info.label} ({info.unit})" if info.unit else info.label
