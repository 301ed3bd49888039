"""Positional or semantic: one score split by RoPE frequency band as well as by part.

RoPE rotates each plane of a query and a key by an angle proportional to the position, at the
plane's own frequency ``theta_f``, so ``q . k`` is a sum over planes of ``q_f . R_f(i - j) k_f``
and the split by plane is exact. A plane turns once every ``2 pi / theta_f`` tokens (its
wavelength): a previous-token head scores in the fast (short-wavelength) planes, a head matching
content in the slow ones (Barbero et al., ICLR 2025). In the ``rotate_half`` convention plane
``f`` holds dimensions ``f`` and ``f + rotary_dim / 2``; dimensions past ``rotary_dim`` (partial
rotary) are never rotated and form a band of their own, ``unrotated``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from models.circuits.why import check_cell
from models.circuits.why_keep import KeptHead, WhyUnavailable
from models.head import Head

UNROTATED = "unrotated"


@dataclass(frozen=True)
class BandSplit:
    """One cell's pairs, each split further by RoPE band.

    Attributes:
        head, query, key: the cell.
        query_parts, key_parts: the part names of each side.
        labels: one per band: ``"0"`` (the fastest plane) to ``"F-1"``, then ``"unrotated"``
            when part of each head is never rotated.
        wavelengths: ``band`` tokens per full turn (``inf`` for ``unrotated``; NaN when the
            prompt has a single token and no turn can be read).
        pairs: ``query_part key_part band`` shares of the raw logit (float64).
    """

    head: Head
    query: int
    key: int
    query_parts: tuple[str, ...]
    key_parts: tuple[str, ...]
    labels: tuple[str, ...]
    wavelengths: np.ndarray
    pairs: np.ndarray

    @property
    def totals(self) -> np.ndarray:
        """``band``: each band's share of the logit."""
        shares: np.ndarray = self.pairs.sum(axis=(0, 1))
        return shares


def band_of_dims(d_head: int, rotary_dim: int) -> torch.Tensor:
    """``d_head``: the band of each dimension (``rotary_dim / 2`` for unrotated ones)."""
    half = rotary_dim // 2
    dims = torch.arange(d_head)
    return torch.where(dims < rotary_dim, dims % half, half)


def wavelengths(cos: torch.Tensor, sin: torch.Tensor) -> np.ndarray:
    """Tokens per turn of each plane, from ``pos rotary_dim`` RoPE tables (positions 0, 1, ...).

    The angle a plane turns between positions 0 and 1 is ``theta_f`` (below pi for every RoPE
    variant: ``theta_0 = 1``), so the tables themselves give it, scaling variants included.
    """
    half = cos.shape[-1] // 2
    if cos.shape[0] < 2:
        return np.full(half, np.nan)
    turn = torch.atan2(sin[1, :half], cos[1, :half]) - torch.atan2(sin[0, :half], cos[0, :half])
    return (2 * math.pi / turn.to(torch.float64)).numpy()


def band_split(kept: KeptHead, query: int, key: int) -> BandSplit:
    """Split head ``kept.head``'s logit at (``query``, ``key``) by part pair and RoPE band.

    Raises:
        WhyUnavailable: the model has no RoPE (its positions are learned or ALiBi).
        CellError: a position outside the prompt, or a key the query never sees.
    """
    cos, sin = kept.query.cos, kept.query.sin
    if cos is None or sin is None:
        raise WhyUnavailable(
            "This model does not rotate queries and keys (no RoPE): its scores have no "
            "frequency bands."
        )
    check_cell(kept, query, key)
    q = kept.query_parts[query].to(torch.float64)
    k = kept.key_parts[key].to(torch.float64)
    d_head, rotary_dim = q.shape[-1], cos.shape[-1]
    band = band_of_dims(d_head, rotary_dim)
    n_bands = int(band.max()) + 1
    products = q[:, None, :] * k[None, :, :] * kept.terms.scale
    pairs = torch.zeros(*products.shape[:2], n_bands, dtype=torch.float64)
    pairs.index_add_(2, band, products)
    labels = [str(f) for f in range(rotary_dim // 2)]
    turns = wavelengths(cos, sin)
    if n_bands > rotary_dim // 2:
        labels.append(UNROTATED)
        turns = np.append(turns, np.inf)
    return BandSplit(
        head=kept.head,
        query=query,
        key=key,
        query_parts=kept.query.names,
        key_parts=kept.key.names,
        labels=tuple(labels),
        wavelengths=turns,
        pairs=pairs.numpy(),
    )
