"""Layers that are not attention: state-space mixers (Mamba, Mamba-2, and hybrids such as
Zamba2, Nemotron-H, Falcon-H1 or Granite 4 that interleave them with attention).

TransformerLens wraps such a layer as a ``mixer`` with no attention pattern; the app reads
softmax attention and Gated DeltaNet layers only, so it refuses a model with any other layer at
load, in one line that names the architecture and the first such layer, rather than failing at
the first prompt.
"""

from __future__ import annotations

from typing import Any

READ = ("attn", "linear_attn")  # the bridge's names of the layers the app reads


def first_unread(bridge: Any) -> tuple[int, str] | None:
    """The first block of ``bridge`` with no attention the app reads: its index and the name
    of what it holds instead (``mixer`` for a state-space layer); None when every block reads."""
    for index, block in enumerate(getattr(bridge, "blocks", ())):
        children = [name for name, _ in block.named_children()]
        if not any(name in children for name in READ):
            other = next((n for n in children if n == "mixer"), None)
            return index, other or "no attention"
    return None


def refusal(bridge: Any, label: str) -> str | None:
    """The one-line refusal of a model with a layer the app cannot read, or None."""
    found = first_unread(bridge)
    if found is None:
        return None
    index, what = found
    config = getattr(getattr(bridge, "original_model", None), "config", None)
    arch = (getattr(config, "architectures", None) or [getattr(config, "model_type", None)])[0]
    kind = "a state-space mixer (Mamba-style), not attention" if what == "mixer" else what
    return (
        f"{arch or label}: layer {index} is {kind}. The app shows softmax attention and Gated "
        f"DeltaNet layers only, so it cannot show {label}."
    )
