"""The Scaling page's state as one frozen value: the sweep's grid, the head, the point looked at,
and the synthetic check's seed (the sweeps themselves run when asked). Its link is read and
written in :mod:`ui.links`. No Streamlit here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar, Literal, get_args

import numpy as np

from models.head import Head
from models.scaling.maths import alpha_to_factor, factor_grid

Axis = Literal["factor", "alpha"]
AXES: tuple[Axis, ...] = get_args(Axis)
POWERS: tuple[float, ...] = tuple(2.0**p for p in range(-6, 7))
MIN_POINTS, MAX_POINTS = 5, 61
MAX_SEED = 2**31 - 1


@dataclass(frozen=True)
class ScalingView:
    """What the Scaling page sweeps and shows.

    Attributes:
        axis: ``factor``: the model's logits times c over ``low``..``high`` (log spaced);
            ``alpha``: q · k divided by d_k^α for α in 0..1.
        low, high: the ends of the factor's range (powers of two).
        points: how many points the sweep has.
        head: the head drawn (None: the first).
        pick: the point looked at (None: the one nearest the model's own scale).
        seed: the synthetic check's random seed.
    """

    IN_SESSION: ClassVar[frozenset[str]] = frozenset()

    axis: Axis = "factor"
    low: float = 1 / 16
    high: float = 16.0
    points: int = 25
    head: Head | None = None
    pick: int | None = None
    seed: int = 0


@dataclass(frozen=True)
class Grid:
    """The sweep's points: factors c, their x values, the x title, where the model's own scale
    sits on x, and whether x is drawn on a log axis."""

    factors: np.ndarray
    x: np.ndarray
    x_title: str
    own_x: float
    log_x: bool

    @property
    def own(self) -> int:
        """The point nearest the model's own scale (c = 1)."""
        return int(np.argmin(np.abs(np.log(self.factors))))


def grid(view: ScalingView, d_head: int) -> Grid:
    """The points ``view`` sweeps for a head of width ``d_head``."""
    if view.axis == "alpha":
        alphas = np.linspace(0.0, 1.0, view.points)
        factors = alpha_to_factor(alphas, d_head)
        return Grid(factors, alphas, "α (logits = q · k / d_k^α)", 0.5, False)
    factors = factor_grid(view.low, view.high, view.points)
    return Grid(factors, factors, "factor c (log scale)", 1.0, True)


def with_grid(view: ScalingView, axis: Axis, low: float, high: float, points: int) -> ScalingView:
    """Another grid; a new grid starts at the model's own scale."""
    new = replace(view, axis=axis, low=low, high=high, points=points)
    return new if new == view else replace(new, pick=None)


def choose_head(view: ScalingView, head: Head) -> ScalingView:
    return replace(view, head=head)


def choose_point(view: ScalingView, pick: int) -> ScalingView:
    return replace(view, pick=pick)


def with_seed(view: ScalingView, seed: int) -> ScalingView:
    return replace(view, seed=int(seed) % (MAX_SEED + 1))


def shown_point(view: ScalingView, found: Grid) -> int:
    """The point looked at: the chosen one where the grid has it, else the model's own."""
    if view.pick is None or not 0 <= view.pick < len(found.factors):
        return found.own
    return view.pick


def clamp(view: ScalingView, n_layers: int, n_heads: int) -> tuple[ScalingView, list[str]]:
    """``view`` fitted to a model and to the widgets' bounds, with a note per change."""
    notes: list[str] = []
    if view.head is not None and not view.head.fits(n_layers, n_heads):
        size = f"{n_layers} layers x {n_heads} heads"
        notes.append(f"Head {view.head} is not in this model ({size}).")
        view = replace(view, head=None)
    points = min(max(view.points, MIN_POINTS), MAX_POINTS)
    points += 1 - points % 2  # odd, so the middle point is the model's own scale
    low, high = nearest_power(view.low), nearest_power(view.high)
    if not (math.isfinite(view.low) and math.isfinite(view.high)) or low >= high:
        notes.append("The range of c needs two different ends; showing 1/16 to 16.")
        low, high = ScalingView.low, ScalingView.high
    fitted = replace(view, points=min(points, MAX_POINTS), low=low, high=high)
    if (fitted.points, fitted.low, fitted.high) != (view.points, view.low, view.high):
        fitted = replace(fitted, pick=None)
    return fitted, notes


def nearest_power(value: float) -> float:
    """The offered power of two nearest ``value`` (in log terms)."""
    if not math.isfinite(value) or value <= 0:
        return POWERS[0]
    return min(POWERS, key=lambda p: abs(math.log2(p) - math.log2(value)))


def head_shown(view: ScalingView) -> Head:
    """The head drawn (the first when none is chosen)."""
    return view.head if view.head is not None else Head(0, 0)
