"""One head's card: what it does, how sure we are, where it fires, and what its spaces hold.

A card is read from an :class:`~models.heads.atlas.compute.Atlas`, without touching the model:

- every quantity with its uncertainty (the rule of its source, stated on the line) and its rank
  among all heads, or why it does not apply, or that it was not measured;
- the weight scores beside their data twins (OV copying with induction, QK previous token with
  the previous-token score);
- texts sampled across the deciles of the head's activation
  (:func:`models.heads.atlas.peaks.decile_sample`), each with the position of the peak and the
  strongest keys of that row;
- the low-rank view: for each space, the leading components with their share of the variance
  and the tokens loading most at either end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from models.head import Head
from models.heads.atlas.compute import Atlas
from models.heads.atlas.lowrank import SPACES, Space
from models.heads.atlas.metrics import (
    METRIC_NAMES,
    METRICS,
    UNCERTAINTY,
    MetricName,
    not_applicable,
    variant_note,
)
from models.heads.atlas.peaks import decile_sample
from models.heads.names import COLUMN_LABELS

Status = Literal["measured", "not_measured", "not_applicable"]


@dataclass(frozen=True)
class MetricLine:
    """One quantity of one head.

    Attributes:
        name: the metric; ``label`` and ``unit`` its words.
        value: the number (None unless ``status`` is ``measured``).
        se: its standard error (None where the source has none or a text count is too small).
        rank: 1 = the largest among ``of`` heads (None unless measured).
        status: ``measured``, ``not_measured`` or ``not_applicable``.
        note: the uncertainty rule, or why the quantity does not apply.
    """

    name: MetricName
    label: str
    unit: str
    value: float | None
    se: float | None
    rank: int | None
    of: int
    status: Status
    note: str


@dataclass(frozen=True)
class SampledText:
    """A text from one decile: where the head peaks in it, and the strongest keys of that row."""

    decile: int
    text: int
    activation: float
    query: int
    key: int
    row: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class TokenLoad:
    """A token loading on a component: text, position, readable token, loading."""

    text: int
    position: int
    token: str
    loading: float


@dataclass(frozen=True)
class ComponentView:
    """One principal component: its share of the variance and the tokens at either end."""

    index: int
    share: float
    positive: tuple[TokenLoad, ...]
    negative: tuple[TokenLoad, ...]


@dataclass(frozen=True)
class SpaceView:
    """One space of the head. ``owner`` is the key/value head it shares, when it does."""

    space: Space
    owner: int | None
    n_tokens: int
    components: tuple[ComponentView, ...]


@dataclass(frozen=True)
class HeadCard:
    """Everything the atlas knows about one head."""

    head: Head
    flags: tuple[str, ...]
    metrics: tuple[MetricLine, ...]
    twins: tuple[tuple[MetricName, MetricName], ...]
    samples: tuple[SampledText, ...]
    lowrank: tuple[SpaceView, ...]

    def metric(self, name: MetricName) -> MetricLine:
        return next(line for line in self.metrics if line.name == name)


def metric_line(atlas: Atlas, head: Head, name: MetricName) -> MetricLine:
    """The line of ``name`` for ``head`` (see :class:`MetricLine`)."""
    info, measure = METRICS[name], atlas.measures[name]
    ranks = measure.ranks()

    def line(
        status: Status,
        note: str,
        value: float | None = None,
        se: float | None = None,
        rank: int | None = None,
    ) -> MetricLine:
        of = int((ranks > 0).sum())
        return MetricLine(name, info.label, info.unit, value, se, rank, of, status, note)

    layer = atlas.layers[head.layer]
    reason = not_applicable(name, layer)
    if reason is not None:
        return line("not_applicable", reason)
    value = float(measure.values[head])
    if not np.isfinite(value):
        return line("not_measured", "not measured")
    se = None if measure.se is None else float(measure.se[head])
    se = se if se is not None and np.isfinite(se) else None
    how = variant_note(name, layer)
    note = UNCERTAINTY[info.source] + (f"; {how}" if how else "")
    return line("measured", note, value, se, int(ranks[head]))


def sampled_texts(atlas: Atlas, head: Head, per_decile: int = 2) -> tuple[SampledText, ...]:
    """Texts across the deciles of the head's activation (strongest decile first)."""
    peaks, (layer, index) = atlas.peaks, head
    out = []
    for decile in decile_sample(peaks.value[:, layer, index], per_decile):
        for text, value in zip(decile.texts, decile.values, strict=True):
            keys = peaks.row_keys[text, layer, index]
            weights = peaks.row_weights[text, layer, index]
            row = tuple((int(k), float(w)) for k, w in zip(keys, weights, strict=True) if k >= 0)
            out.append(
                SampledText(
                    decile.index,
                    text,
                    value,
                    int(peaks.query[text, layer, index]),
                    int(peaks.key[text, layer, index]),
                    row,
                )
            )
    return tuple(out)


def space_view(atlas: Atlas, head: Head, space: Space) -> SpaceView:
    """The head's components in ``space`` with their top-loading tokens."""
    view = atlas.lowrank[space]
    group = atlas.facts.n_heads // max(atlas.facts.n_kv_heads, 1)
    index = head.index // group if space in ("key", "value") else head.index
    at = (head.layer, index)

    def loads(c: int, end: int) -> tuple[TokenLoad, ...]:
        found = zip(
            view.top_text[at][c, end],
            view.top_position[at][c, end],
            view.top_value[at][c, end],
            strict=True,
        )
        return tuple(
            TokenLoad(int(t), int(p), atlas.tokens[t][p], float(v)) for t, p, v in found if t >= 0
        )

    components = tuple(
        ComponentView(c, float(view.share[at][c]), loads(c, 0), loads(c, 1))
        for c in range(view.share.shape[-1])
    )
    return SpaceView(space, index if view.shared else None, view.n_tokens, components)


def head_card(atlas: Atlas, head: Head, per_decile: int = 2) -> HeadCard:
    """The card of ``head`` (see the module docstring)."""
    if not head.fits(atlas.facts.n_layers, atlas.facts.n_heads):
        raise ValueError(f"{head} is not a head of {atlas.facts.name}")
    flags = tuple(COLUMN_LABELS[name] for name, grid in atlas.flags.items() if grid[head])
    twins = tuple((name, twin) for name in METRIC_NAMES if (twin := METRICS[name].twin) is not None)
    return HeadCard(
        head=head,
        flags=flags,
        metrics=tuple(metric_line(atlas, head, name) for name in METRIC_NAMES),
        twins=twins,
        samples=sampled_texts(atlas, head, per_decile),
        lowrank=tuple(space_view(atlas, head, space) for space in SPACES),
    )
