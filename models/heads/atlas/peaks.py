"""A head's activation on a text, and texts sampled across the deciles of that activation.

Following HeadVis and Neuronpedia, a head's *activation* on a sequence is its strongest
attention weight in it, key 0 skipped::

    activation = max_{i, j >= 1} A[i, j]

Most heads park attention on the first token whatever the text (a sink), so with key 0 counted
nearly every text would score near 1 and the ranking would say nothing. Under a causal mask row 0
sees only key 0 and so never counts; in an encoder row 0 ([CLS]) counts like any other row.

A head's card shows texts sampled across the deciles of its activation, not only its top texts,
so that a head that fires strongly on a few texts and weakly on the rest shows both.
:func:`decile_sample` states the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float, Int

ROW_KEYS = 8
"""Keys kept of the row where a head peaks (its strongest ones), as Neuronpedia stores rows."""
MIN_ROW_WEIGHT = 0.005
"""Weights below this are left out of a kept row (Neuronpedia's cut)."""
N_DECILES = 10


@dataclass(frozen=True)
class Peaks:
    """Where each head peaks on each text (``text layer head_index`` arrays).

    Attributes:
        value: the activation (NaN for a text with no key after the first).
        query, key: the position of that weight (-1 where ``value`` is NaN).
        row_keys: ``text layer head_index ROW_KEYS``: the strongest keys of row ``query``,
            strongest first (-1 where the weight is under :data:`MIN_ROW_WEIGHT`).
        row_weights: their weights (0 where ``row_keys`` is -1).
    """

    value: Float[np.ndarray, "text layer head_index"]
    query: Int[np.ndarray, "text layer head_index"]
    key: Int[np.ndarray, "text layer head_index"]
    row_keys: Int[np.ndarray, "text layer head_index row_key"]
    row_weights: Float[np.ndarray, "text layer head_index row_key"]

    @classmethod
    def empty(cls, n_texts: int, n_layers: int, n_heads: int) -> Peaks:
        shape = (n_texts, n_layers, n_heads)
        return cls(
            value=np.full(shape, np.nan),
            query=np.full(shape, -1),
            key=np.full(shape, -1),
            row_keys=np.full((*shape, ROW_KEYS), -1),
            row_weights=np.zeros((*shape, ROW_KEYS), dtype=np.float32),
        )

    def record(
        self, text: int, layer: int, pattern: Float[torch.Tensor, "head_index query_pos key_pos"]
    ) -> None:
        """Fill text ``text``, layer ``layer`` from that layer's patterns (float32 or lower)."""
        heads, _, n_keys = pattern.shape
        if n_keys < 2:
            return
        rest = pattern[:, :, 1:].float().reshape(heads, -1)
        value, flat = rest.max(dim=-1)
        query, key = flat // (n_keys - 1), flat % (n_keys - 1) + 1
        rows = pattern[torch.arange(heads), query].float()  # head_index key_pos
        weights, keys = rows.topk(min(ROW_KEYS, n_keys), dim=-1)
        kept = weights >= MIN_ROW_WEIGHT
        width = weights.shape[-1]
        self.value[text, layer] = value.double().numpy()
        self.query[text, layer] = query.numpy()
        self.key[text, layer] = key.numpy()
        self.row_keys[text, layer, :, :width] = torch.where(kept, keys, -1).numpy()
        self.row_weights[text, layer, :, :width] = torch.where(kept, weights, 0.0).numpy()


@dataclass(frozen=True)
class Decile:
    """One decile of a head's texts: ``index`` 0 is the strongest tenth.

    Attributes:
        index: the decile, 0 (strongest) to 9.
        low, high: the smallest and largest activation in the decile.
        texts: the sampled texts, strongest first.
        values: their activations.
    """

    index: int
    low: float
    high: float
    texts: tuple[int, ...]
    values: tuple[float, ...]


def decile_sample(
    activation: Float[np.ndarray, " text"], per_decile: int = 2, n_deciles: int = N_DECILES
) -> list[Decile]:
    """Texts sampled evenly across the deciles of one head's activation.

    The texts with an activation are ranked strongest first (ties: the earlier text first).
    With ``N`` ranked texts, decile ``d`` holds ranks ``floor(d N / 10)`` up to
    ``floor((d + 1) N / 10) - 1``; a decile with no text (fewer than ten texts) is left out.
    From a decile of ``m`` texts, ``min(per_decile, m)`` are taken at evenly spaced ranks,
    its strongest always among them (ranks ``round(linspace(0, m - 1, k))``).

    Args:
        activation: one value per text (NaN: the text is left out).
        per_decile: texts to take from each decile.
        n_deciles: how many slices (10: deciles).

    Returns:
        The non-empty deciles, strongest first.
    """
    values = np.asarray(activation, dtype=np.float64)
    ranked = np.flatnonzero(np.isfinite(values))
    ranked = ranked[np.argsort(-values[ranked], kind="stable")]
    n = len(ranked)
    out = []
    for d in range(n_deciles):
        members = ranked[d * n // n_deciles : (d + 1) * n // n_deciles]
        if not len(members):
            continue
        picks = np.unique(np.round(np.linspace(0, len(members) - 1, min(per_decile, len(members)))))
        chosen = members[picks.astype(int)]
        out.append(
            Decile(
                index=d,
                low=float(values[members].min()),
                high=float(values[members].max()),
                texts=tuple(int(t) for t in chosen),
                values=tuple(float(values[t]) for t in chosen),
            )
        )
    return out
