"""Two ways to hold every head's attention: the full stack, or what rebuilds any window of it.

A prompt of a few hundred tokens keeps the whole ``layer head_index query_pos key_pos`` stack
(:class:`DensePatterns`). Past that the stack outgrows memory (GPT-2 small at 2,048 tokens would
need 2.4 GB in fp32), so :class:`FactoredPatterns` keeps each layer's q and k and the per-row
log-sum-exp of the model's own scores: ``P = exp(q k^T * scale - lse)``, masked to 0, gives any
head, row or window exactly, on demand. A streaming capture also keeps every head's max-pooled
thumbnail, its value norms, and how well the kept arrays reproduced the fused kernel's output
(:class:`SdpaCheck`); a head's larger overview is made from q, k and LSE when it is shown.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Shaped

from models.attention import AttentionOptions, pattern_of_rows
from models.capture.overview import layer_overview, row_stride
from models.shapes import HeadPattern, LayerPatterns, PatternStack

Rows = slice | Sequence[int]
"""Query rows of a window: a slice, or positions in any order."""
Pairs = slice | np.ndarray
"""One side of the ``(row, key)`` pairs :meth:`FactoredPatterns.entries` reads: positions, or a
slice standing for the positions it selects (read as one block, not gathered)."""


def read_only(array: Shaped[np.ndarray, "*shape"]) -> Shaped[np.ndarray, "*shape"]:
    """Cached arrays are shared by every session: make accidental writes fail loudly.

    Args:
        array: any array; its flag is changed in place.

    Returns:
        The same array, no longer writeable.
    """
    array.flags.writeable = False
    return array


def _positions(index: Rows | np.ndarray, n: int) -> np.ndarray:
    """The integer positions ``index`` (a slice or positions) stands for among ``n``."""
    try:
        return np.arange(n)[index]
    except IndexError as err:
        raise ValueError(f"a window reaches outside the prompt: {err}") from err


def _pairs(rows: Pairs, cols: Pairs | int, n: int, n_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``(row, key)`` positions of :meth:`FactoredPatterns.entries`' pairs."""
    q_pos = _positions(rows, n)
    k_pos = np.full(len(q_pos), cols) if isinstance(cols, int) else _positions(cols, n_k)
    if len(k_pos) != len(q_pos):
        raise ValueError(f"{len(q_pos)} rows paired with {len(k_pos)} keys")
    return q_pos, k_pos


def _picked(array: np.ndarray, index: Rows | np.ndarray, positions: np.ndarray) -> np.ndarray:
    """A writeable copy of ``array[:, index]`` (``positions``: the same, as integers): a slice
    is copied as one block, a list of positions by integer indexing (which copies)."""
    return np.array(array[:, index]) if isinstance(index, slice) else array[:, positions]


@dataclass(frozen=True)
class DensePatterns:
    """Every pattern held at once: ``layer head_index query_pos key_pos`` float32."""

    stack: PatternStack

    @property
    def nbytes(self) -> int:
        return int(self.stack.nbytes)

    def layer(self, layer: int) -> LayerPatterns:
        """Every head's pattern of one layer."""
        found: LayerPatterns = self.stack[layer]
        return found

    def window(self, layer: int, head: int, rows: slice, cols: slice) -> HeadPattern:
        """One head's ``rows`` queries by ``cols`` keys."""
        return self.stack[layer, head, rows, cols]

    def layer_window(self, layer: int, rows: Rows, cols: slice) -> LayerPatterns:
        """Every head's ``rows`` queries by ``cols`` keys of one layer."""
        picked = rows if isinstance(rows, slice) else list(rows)
        found: np.ndarray = self.stack[layer][:, picked, cols]
        return found

    def entries(self, layer: int, rows: Pairs, cols: Pairs | int) -> np.ndarray:
        """``head_index pair`` weights ``A[rows[i], cols[i]]`` of every head of one layer (see
        :meth:`FactoredPatterns.entries` for what ``rows`` and ``cols`` may be)."""
        q_pos, k_pos = _pairs(rows, cols, self.stack.shape[-2], self.stack.shape[-1])
        found: np.ndarray = self.stack[layer][:, q_pos, k_pos]
        return found


@dataclass(frozen=True)
class SdpaCheck:
    """How closely the kept q, k and LSE reproduce the fused kernel's own output.

    Attributes:
        dtype: the dtype the model (and its kernel) ran in.
        error: largest ``|sum_j w_j v_j - SDPA output|`` over the sampled rows, every layer,
            head and dimension (float32 arithmetic on the kept arrays).
        ratio: largest error divided by what that dtype's rounding allows (the check passes
            at <= 1; see :func:`models.capture.streaming.allowed_error`).
        lse_error: largest ``|kept LSE - float32 LSE|`` on the sampled rows (the kernel's own
            statistics against a float32 recomputation; 0 when computed here).
        rows: the sampled query rows.
        relative: ``||sum_j w_j v_j - SDPA output|| / ||SDPA output||`` over those rows.
    """

    dtype: str
    error: float
    ratio: float
    lse_error: float
    rows: tuple[int, ...]
    relative: float = 0.0


@dataclass(frozen=True)
class FactoredPatterns:
    """Patterns rebuilt on demand from q, k and the log-sum-exp of each row.

    Attributes:
        q: ``layer head_index query_pos d_head`` float32.
        k: ``layer kv_head_index key_pos d_head`` float32 (fewer heads for GQA/MQA).
        lse: ``layer head_index query_pos`` float32, natural log.
        scales: the model's logit scale for each layer.
        causal: whether keys after the query are masked.
        pooled: ``layer head_index pixel pixel`` max-pooled weights (NaN where wholly masked),
            filled by the streaming capture; None when thumbnails must be computed.
        pool_factor: positions per pixel edge of ``pooled``.
        value_norms: ``layer head_index key_pos`` ``||v_j W_O^h||`` from the streaming capture
            (for value-weighted views), or None.
        overview_factor: positions per pixel edge of the 256-pixel overview of a head
            (:meth:`head_overview`).
        overview_arithmetic: how the thumbnails' logit products were computed: ``float32``
            (the exact max-pool of the float32 pattern over the rows read) or ``model``
            (products in the model's low-precision dtype, within the bound
            :func:`models.capture.overview.layer_overview` states).
        check: how well the kept arrays reproduced the fused kernel (streaming capture only).
        layer_errors: each layer's relative error in that check (streaming capture only).
    """

    q: np.ndarray
    k: np.ndarray
    lse: np.ndarray
    scales: tuple[float, ...]
    causal: bool
    pooled: np.ndarray | None = None
    pool_factor: int = 1
    value_norms: np.ndarray | None = None
    overview_factor: int = 1
    overview_arithmetic: str = "float32"
    check: SdpaCheck | None = None
    layer_errors: tuple[float, ...] | None = None

    @property
    def nbytes(self) -> int:
        extra = sum(0 if a is None else a.nbytes for a in (self.pooled, self.value_norms))
        return int(self.q.nbytes + self.k.nbytes + self.lse.nbytes + extra)

    def head_overview(self, layer: int, head: int, factor: int) -> np.ndarray:
        """One head's whole pattern max-pooled ``factor`` positions a pixel (NaN where wholly
        masked), from the kept float32 q, k and LSE: over every row while a pixel has at most
        8 rows, over 8 evenly spaced rows of each pixel beyond (a few milliseconds at 2,048
        tokens; see :func:`models.capture.overview.layer_overview`)."""
        group = self.q.shape[1] // self.k.shape[1]
        q = torch.from_numpy(np.array(self.q[layer, head : head + 1]))  # copies: the kept
        k = torch.from_numpy(np.array(self.k[layer, head // group : head // group + 1]))
        lse = torch.from_numpy(np.array(self.lse[layer, head : head + 1]))  # are read-only
        pooled = layer_overview(
            q, k, lse, self.scales[layer], self.causal, factor, stride=row_stride(factor)
        )
        return pooled[0].numpy()

    def _rebuild(self, layer: int, heads: slice, rows: Rows, cols: slice) -> LayerPatterns:
        n_heads, n_kv, n, n_k = self.q.shape[1], self.k.shape[1], self.q.shape[2], self.k.shape[2]
        group = n_heads // n_kv
        head_ids = range(n_heads)[heads]
        kv_lo, kv_hi = head_ids[0] // group, head_ids[-1] // group + 1
        q_pos, k_pos = _positions(rows, n), _positions(cols, n_k)
        # copies of only the rows and keys read (the kept arrays are read-only)
        q = torch.from_numpy(_picked(self.q[layer, heads], rows, q_pos))
        k = torch.from_numpy(_picked(self.k[layer, kv_lo:kv_hi], cols, k_pos))
        whole_groups = head_ids[0] % group == 0 and len(head_ids) % group == 0
        if not whole_groups:  # the rebuilt heads must line up with their shared key head
            k = k[torch.tensor([h // group - kv_lo for h in head_ids])]
        lse = torch.from_numpy(_picked(self.lse[layer, heads], rows, q_pos))
        out = pattern_of_rows(
            q[None],
            k[None],
            lse[None],
            torch.from_numpy(q_pos),
            torch.from_numpy(k_pos),
            n,
            n_k,
            AttentionOptions(causal=self.causal, scale=self.scales[layer]),
        )
        return out[0].numpy()

    def layer(self, layer: int) -> LayerPatterns:
        """Every head's pattern of one layer, rebuilt (``n_heads * pos^2`` floats)."""
        return self._rebuild(layer, slice(None), slice(None), slice(None))

    def window(self, layer: int, head: int, rows: slice, cols: slice) -> HeadPattern:
        """One head's ``rows`` queries by ``cols`` keys, rebuilt."""
        found: HeadPattern = self._rebuild(layer, slice(head, head + 1), rows, cols)[0]
        return found

    def entries(self, layer: int, rows: Pairs, cols: Pairs | int) -> np.ndarray:
        """``head_index pair`` weights ``A[rows[i], cols[i]]`` of every head of one layer, each
        rebuilt alone (``exp(q_r . k_c * scale - lse_r)``, 0 above the diagonal of a causal
        model): ``n_heads * len(rows) * d_head`` products, never a whole row.

        ``rows`` and ``cols`` are equal-length positions, or slices of equal length (a band
        such as ``A[i, i - 1]`` is then read as two blocks of q and k rather than gathered
        row by row); ``cols`` may be one key for every row (a column such as ``A[i, 0]``).
        """
        n_heads, n_kv, n, n_k = self.q.shape[1], self.k.shape[1], self.q.shape[2], self.k.shape[2]
        q_pos, k_pos = _pairs(rows, cols, n, n_k)
        q = torch.from_numpy(_picked(self.q[layer], rows, q_pos))  # copies only these rows
        keys = slice(cols, cols + 1) if isinstance(cols, int) else cols  # one key broadcasts
        k = torch.from_numpy(_picked(self.k[layer], keys, k_pos))
        lse = torch.from_numpy(_picked(self.lse[layer], rows, q_pos))
        group = n_heads // n_kv  # query heads sharing one key head (GQA, MQA)
        logits = torch.linalg.vecdot(torch.unflatten(q, 0, (n_kv, group)), k[:, None]).flatten(0, 1)
        weights = torch.exp(logits * self.scales[layer] - lse)
        seen = k_pos <= q_pos if self.causal else np.ones(len(q_pos), dtype=bool)
        return torch.where(torch.from_numpy(seen)[None] & torch.isfinite(lse), weights, 0.0).numpy()

    def layer_window(self, layer: int, rows: Rows, cols: slice) -> LayerPatterns:
        """Every head's ``rows`` queries by ``cols`` keys of one layer, rebuilt."""
        return self._rebuild(
            layer, slice(None), rows if isinstance(rows, slice) else list(rows), cols
        )


PatternStore = DensePatterns | FactoredPatterns


def iter_layers(store: PatternStore, n_layers: int) -> Iterator[LayerPatterns]:
    """Each layer's ``head_index query_pos key_pos`` patterns in turn (one layer in memory)."""
    for layer in range(n_layers):
        yield store.layer(layer)
