"""Differential attention (DiffLlama): two softmax maps, one subtracted from the other.

Each head computes ``(softmax(Q1 K1^T) - lambda * softmax(Q2 K2^T)) V`` with a learned
``lambda`` per layer, then a group norm. TransformerLens has no adapter for it, so the app
cannot read its maps through the bridge and refuses such a model in one line that names it.
"""

from __future__ import annotations

from typing import Any


def is_differential(config: Any) -> bool:
    """Whether a configuration describes differential attention (a learned ``lambda``)."""
    return getattr(config, "lambda_std_dev", None) is not None


def what_it_computes(config: Any) -> str:
    """A few words on the attention a configuration describes, for a refusal ("" if plain)."""
    if is_differential(config):
        return " (differential attention: two softmax maps, one subtracted from the other)"
    return ""


def no_adapter(config: Any, label: str) -> str:
    """The refusal of a model TransformerLens has no adapter for: its architecture by name and,
    when that is why, what its attention computes; never the list of every supported one."""
    arch = (getattr(config, "architectures", None) or [getattr(config, "model_type", None)])[0]
    return (
        f"TransformerLens has no adapter for {arch or label}{what_it_computes(config)}, so the "
        f"app cannot read the attention of {label}."
    )
