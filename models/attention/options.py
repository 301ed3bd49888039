"""What a softmax adds to ``q kᵀ``, as one value every attention function takes.

:class:`AttentionOptions` holds which keys each query sees (the causal mask, a sliding window, a
key padding mask) and what happens to the logits before the softmax (the scale, ALiBi slopes,
a soft cap). The app's kernel, its tiled twin, the naive reference, the pattern rebuilt from the
log-sum-exp, the generation's rows and the eviction policies all take it whole, so an option
can never be passed to one of them and forgotten by another. The masking rules themselves are
in :mod:`models.attention.masking`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from models.shapes import KeyMask, Slopes


@dataclass(frozen=True, eq=False)
class AttentionOptions:
    """One attention's softmax terms besides q and k.

    Attributes:
        causal: each query sees only keys at or before it (bottom-right aligned when there are
            fewer queries than keys, as when decoding with a cache).
        scale: the logit multiplier; None means ``1 / sqrt(d_head)``.
        alibi: ``head_index`` ALiBi slopes (``-slope * distance`` added to the logits), or None.
        window: a query sees only the last ``window`` keys (causal) or ``|i - j| < window``.
        softcap: logits become ``c * tanh(logit / c)`` before the mask (Gemma 2), or None.
        padding: ``batch key_pos`` bool, True where the key is a real token, or None.
    """

    causal: bool = False
    scale: float | None = None
    alibi: Slopes | None = None
    window: int | None = None
    softcap: float | None = None
    padding: KeyMask | None = None

    def scale_for(self, d_head: int) -> float:
        """The logit multiplier for queries of width ``d_head``."""
        return 1.0 / math.sqrt(d_head) if self.scale is None else float(self.scale)

    def with_scale(self, d_head: int) -> AttentionOptions:
        """The same options with the scale made explicit."""
        return replace(self, scale=self.scale_for(d_head))

    def capped(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` after the soft cap (unchanged without one)."""
        if self.softcap is None:
            return logits
        return torch.tanh(logits / self.softcap) * self.softcap


NO_OPTIONS = AttentionOptions()  # full attention at the 1 / sqrt(d_head) scale
