"""The Atlas page's state as one frozen value: the scatter's axes and the selected head, read
from and written to the link. No Streamlit here.

The link carries ``ax``, ``ay``, ``ac`` and ``as`` (x, y, colour and size: metric names, colour
and size may be empty) and the selected head as ``layer`` and ``head`` (the explorer's names, so
a link opens the same head on either page). Anything the page cannot use is dropped with a note,
never raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from models.head import Head
from models.heads.atlas.metrics import METRIC_NAMES, METRICS, MetricName

AXIS_KEYS = {"x": "ax", "y": "ay", "colour": "ac", "size": "as"}
DEFAULT_AXES: dict[str, MetricName | None] = {
    "x": "entropy",
    "y": "previous_token",
    "colour": "induction",
    "size": None,
}


@dataclass(frozen=True)
class AtlasView:
    """What the scatter shows and which head's card is open (None: no card)."""

    x: MetricName = "entropy"
    y: MetricName = "previous_token"
    colour: MetricName | None = "induction"
    size: MetricName | None = None
    head: Head | None = None

    def columns(self) -> tuple[str, str, str | None, str | None]:
        """The atlas table's columns of x, y, colour and size."""
        return self.x, self.y, self.colour, self.size


def _metric(raw: str | None, name: str, notes: list[str]) -> MetricName | None:
    default = DEFAULT_AXES[name]
    if raw is None:
        return default
    value = raw.strip()
    if value == "" and name in ("colour", "size"):
        return None
    found = next((metric for metric in METRIC_NAMES if metric == value), None)
    if found is None:
        notes.append(f"Ignored {AXIS_KEYS[name]}={raw!r} in the link: not a quantity of the atlas.")
        return default
    return found


def from_query(params: Mapping[str, str]) -> tuple[AtlasView, list[str]]:
    """The view a link asks for, and a note for each part of it that was dropped."""
    notes: list[str] = []
    x, y = _metric(params.get("ax"), "x", notes), _metric(params.get("ay"), "y", notes)
    colour, size = (
        _metric(params.get("ac"), "colour", notes),
        _metric(params.get("as"), "size", notes),
    )
    head = None
    if "layer" in params and "head" in params:
        try:
            head = Head.parse(f"{params['layer']}.{params['head']}")
        except ValueError:
            notes.append("Ignored the head in the link: layer and head are whole numbers.")
    return AtlasView(x or "entropy", y or "previous_token", colour, size, head), notes


def to_query(view: AtlasView) -> dict[str, str]:
    """The link's parameters for ``view`` (the head left out when none is selected)."""
    out = {key: getattr(view, name) or "" for name, key in AXIS_KEYS.items()}
    if view.head is not None:
        out.update(layer=str(view.head.layer), head=str(view.head.index))
    return out


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
