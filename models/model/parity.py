"""Whether TransformerLens's bridge computes what transformers computes, checked once per model.

The bridge re-implements every attention layer to put hooks inside it; an adapter that misses a
term (a sink, a soft-cap, a gate) would show patterns of a model that does not exist. Before a
model's first capture, a short prompt runs through the bridge and through transformers' own
eager code on the same weights (:mod:`models.model.eager`) and their logits are compared. When
they disagree the run says so, and captures take their patterns from transformers' eager pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from models.model.eager import run_eager
from models.model.handle import ModelHandle
from models.model.loading import bridge_of

PROBE_TEXT = "The cat sat on the mat. The dog sat on the log. The cat"
TOLERANCE = {"float32": 1e-4}
HALF_TOLERANCE = 5e-2
MEMO_KEY = "parity"


@dataclass(frozen=True)
class Parity:
    """The bridge's logits against transformers' on a short prompt.

    Attributes:
        largest: the largest absolute difference of any logit.
        scale: the largest absolute logit transformers gave (the difference is relative to it).
        tolerance: the largest relative difference that still counts as agreement.
        n_tokens: the prompt's length.
        architecture: the model's architecture.
    """

    largest: float
    scale: float
    tolerance: float
    n_tokens: int
    architecture: str

    @property
    def relative(self) -> float:
        return self.largest / max(self.scale, 1e-12)

    @property
    def agrees(self) -> bool:
        return self.relative <= self.tolerance

    def text(self) -> str:
        """One sentence for the page (the disagreement, or the agreement, with its number)."""
        if self.agrees:
            return (
                f"TransformerLens's bridge and transformers agree on {self.architecture}'s "
                f"logits (relative difference {self.relative:.1e} on {self.n_tokens} tokens)."
            )
        return (
            f"TransformerLens's bridge and transformers disagree on {self.architecture}'s "
            f"logits (relative difference {self.relative:.2g} on {self.n_tokens} tokens, "
            f"tolerance {self.tolerance:.0e}): the patterns shown come from transformers' own "
            "eager attention, not from the bridge."
        )


def parity_of(model: ModelHandle) -> Parity | None:
    """:func:`check_parity` of ``model``, made once (on its first capture) and kept with it."""
    if MEMO_KEY not in model.memo:
        model.memo[MEMO_KEY] = check_parity(model)
    found: Parity | None = model.memo[MEMO_KEY]
    return found


def check_parity(model: ModelHandle) -> Parity | None:
    """Compare the bridge's logits with transformers' on :data:`PROBE_TEXT` (None when the
    model's outputs are not logits of the same shape, such as an encoder's, or when the
    reference pass cannot run: the comparison is a check, never a reason to refuse a model
    that loaded)."""
    try:
        return _compare(model)
    except Exception:  # noqa: BLE001 - an architecture transformers' own pass cannot run
        return None


def _compare(model: ModelHandle) -> Parity | None:
    ids = bridge_of(model).to_tokens(PROBE_TEXT, truncate=False)[:, : model.facts.n_ctx].cpu()
    device = str(bridge_of(model).cfg.device or "cpu")
    with model.lock, torch.no_grad():
        extra = {"use_cache": False} if model.facts.causal else {}
        bridge = bridge_of(model)(ids.to(device), **extra)
    reference, _ = run_eager(model, ids)
    if not isinstance(bridge, torch.Tensor) or bridge.shape != reference.shape:
        return None
    bridge, reference = bridge.to("cpu", torch.float32), reference.to("cpu", torch.float32)
    return Parity(
        largest=float((bridge - reference).abs().max()),
        scale=float(reference.abs().max()),
        tolerance=TOLERANCE.get(model.spec.dtype, HALF_TOLERANCE),
        n_tokens=int(ids.shape[1]),
        architecture=model.facts.architecture,
    )
