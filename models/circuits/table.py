"""The per-head table of a patching run: one row per head, and its CSV."""

from __future__ import annotations

import numpy as np
import pandas as pd

FLOAT_FORMAT = "%.6g"


def circuit_table(patch_effect: np.ndarray | None, dla: np.ndarray) -> pd.DataFrame:
    """Rows ``L.H, layer, head, patch_effect, dla`` in layer-then-head order.

    Args:
        patch_effect: ``layer head_index`` patch effects, or ``None`` before patching ran
            (the column is then left empty).
        dla: ``layer head_index`` direct logit attribution.
    """
    n_layers, n_heads = dla.shape
    layers, heads = np.divmod(np.arange(n_layers * n_heads), n_heads)
    effects = (
        np.full(n_layers * n_heads, np.nan)
        if patch_effect is None
        else np.asarray(patch_effect, dtype=np.float64).ravel()
    )
    return pd.DataFrame(
        {
            "L.H": [f"{layer}.{head}" for layer, head in zip(layers, heads, strict=True)],
            "layer": layers,
            "head": heads,
            "patch_effect": effects,
            "dla": np.asarray(dla, dtype=np.float64).ravel(),
        }
    )


def top_heads(values: np.ndarray, k: int = 5) -> list[tuple[str, float]]:
    """The ``k`` heads with the largest values, as ``("L.H", value)``."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    order = np.argsort(-np.where(np.isnan(flat), -np.inf, flat), kind="stable")[:k]
    n_heads = values.shape[1]
    return [(f"{i // n_heads}.{i % n_heads}", float(flat[i])) for i in order]


def table_csv(table: pd.DataFrame) -> str:
    """CSV text of a circuit table."""
    text: str = table.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    return text
