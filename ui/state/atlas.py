"""The Atlas page's state as one frozen value, and every way it changes: the scatter's axes and
the selected head. Its link is read and written in :mod:`ui.links`. No Streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from models.head import Head
from models.heads.atlas.metrics import METRIC_NAMES, METRICS, MetricName


@dataclass(frozen=True)
class AtlasView:
    """What the scatter shows and which head's card is open (None: no card). Its link carries
    every field."""

    IN_SESSION: ClassVar[frozenset[str]] = frozenset()

    x: MetricName = "entropy"
    y: MetricName = "previous_token"
    colour: MetricName | None = "induction"
    size: MetricName | None = None
    head: Head | None = None

    def columns(self) -> tuple[str, str, str | None, str | None]:
        """The atlas table's columns of x, y, colour and size."""
        return self.x, self.y, self.colour, self.size


def clamp(view: AtlasView, n_layers: int, n_heads: int) -> tuple[AtlasView, list[str]]:
    """Drop a selected head the model does not have, with a note."""
    if view.head is None or view.head.fits(n_layers, n_heads):
        return view, []
    note = f"Head {view.head} is not in this model ({n_layers} layers x {n_heads} heads)."
    return replace(view, head=None), [note]


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
