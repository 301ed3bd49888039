"""The colour scales every figure shares, so that a colour means the same thing on every page.

- :data:`SIGNED`: values of either sign (A − B, patching effects, direct logit attribution,
  edges of the circuit graph): red for positive, white at 0, blue for negative.
- :data:`POSITIVE` and :data:`NEGATIVE`: the two ends of :data:`SIGNED`, for lines and bars.
- :func:`largest_magnitude`: where a :data:`SIGNED` scale ends, symmetric about 0.
- :data:`SEQUENTIAL`: values that cannot be negative (attention weights, composition scores):
  white at 0, darker as the value grows.

Every colour bar is titled on its side (:func:`colour_bar`): a title turned along the bar needs
one line's height beside it, however long, where a title on top widens the bar's room to the
title's length and squeezes the plot.
"""

from __future__ import annotations

import numpy as np

SIGNED = "RdBu_r"
POSITIVE, NEGATIVE = "#b2182b", "#2166ac"  # SIGNED's red and blue ends
SEQUENTIAL = "Blues"


def colour_bar(title: str, **options: object) -> dict:
    """A colour bar's settings with ``title`` (markup: escape what a user typed) on its side,
    reading upwards along the bar; ``options`` are further colour-bar settings."""
    return {"title": {"text": title, "side": "right"}, **options}


def largest_magnitude(values: np.ndarray) -> float:
    """The largest finite ``|value|``, where a signed scale symmetric about 0 ends (1.0 where
    there is none, or every value is 0)."""
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0
