"""A score of every head over many texts: its mean, its spread, and the lower bound flags use.

Each text is one observation. For a head with ``n`` texts that have something to score (a
text without a repeated token has no duplicate-token score, and is left out, never counted as
0)::

    mean = (1 / n) * sum_t s_t
    se   = std(s_t, ddof=1) / sqrt(n)                  (standard error of the mean)
    lower_bound = mean - Z * se   with Z = 2           (about a 95 % one-sided bound)

With one text there is no spread: ``se`` is NaN and the lower bound is the mean itself.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Z = 2.0


@dataclass(frozen=True)
class Spread:
    """``per_text`` is ``text layer head_index`` (NaN where a text has nothing to score)."""

    per_text: np.ndarray

    def _quiet(self, fn: Callable[..., np.ndarray], **kwargs: int) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(self.per_text, axis=0, **kwargs)

    @property
    def n(self) -> np.ndarray:
        """How many texts scored each head."""
        counts: np.ndarray = (~np.isnan(self.per_text)).sum(axis=0)
        return counts

    @property
    def mean(self) -> np.ndarray:
        return self._quiet(np.nanmean)

    @property
    def se(self) -> np.ndarray:
        """Standard error of the mean; NaN for a head scored on fewer than two texts."""
        n = self.n
        std = (
            self._quiet(np.nanstd, ddof=1)
            if self.per_text.shape[0] > 1
            else np.full(n.shape, np.nan)
        )
        return np.where(n >= 2, std / np.sqrt(np.maximum(n, 1)), np.nan)

    @property
    def low(self) -> np.ndarray:
        return self._quiet(np.nanmin)

    @property
    def high(self) -> np.ndarray:
        return self._quiet(np.nanmax)

    @property
    def lower_bound(self) -> np.ndarray:
        """``mean - Z * se``, or the mean where there is no standard error."""
        se = self.se
        return np.where(np.isnan(se), self.mean, self.mean - Z * se)


def spread(per_text: np.ndarray) -> Spread:
    """A :class:`Spread` over the first axis of ``per_text`` (cast to float64)."""
    values = np.asarray(per_text, dtype=np.float64)
    if values.ndim < 1 or values.shape[0] < 1:
        raise ValueError("a spread needs at least one text")
    return Spread(values)
