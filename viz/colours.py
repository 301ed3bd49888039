"""The colour scales every figure shares, so that a colour means the same thing on every page.

- :data:`SIGNED`: values of either sign (A − B, patching effects, direct logit attribution,
  edges of the circuit graph): red for positive, white at 0, blue for negative.
- :data:`POSITIVE` and :data:`NEGATIVE`: the two ends of :data:`SIGNED`, for lines and bars.
- :data:`SEQUENTIAL`: values that cannot be negative (attention weights, composition scores):
  white at 0, darker as the value grows.
"""

from __future__ import annotations

SIGNED = "RdBu_r"
POSITIVE, NEGATIVE = "#b2182b", "#2166ac"  # SIGNED's red and blue ends
SEQUENTIAL = "Blues"
