"""How closely the patterns a run shows reproduce what each layer really computed, measured.

For every softmax layer, on a few sampled query rows: the shown weights times the values (and
the head's output gate, where it has one), sent through the layer's own output projection,
against the output that projection really produced in transformers' own eager pass
(:mod:`models.model.eager`). For a linear-attention layer: its mixing matrix times the values
against the delta rule's output. The error is relative: ``||got - real|| / ||real||`` over the
sampled rows (the projection's bias left out of both). A run whose worst layer lies above the
stated tolerance is not drawn: the page says why, naming the architecture.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float

from models.model.eager import EagerLayer

TOLERANCE = {"float32": 1e-4}
HALF_TOLERANCE = 2e-2  # bfloat16 / float16: a few units of their rounding through one layer
SAMPLE_ROWS = 8
RULE = (
    "Fidelity: on sampled query rows of every layer, the weights shown times the values (and "
    "the head's gate, where it has one), through the layer's output projection, against the "
    "output the model itself computed; for linear-attention layers, the mixing matrix times "
    "the values against the layer's own delta-rule output."
)


def tolerance(dtype: str) -> float:
    """The largest relative error a run in ``dtype`` may show and still be drawn."""
    return TOLERANCE.get(dtype, HALF_TOLERANCE)


def sample_rows(n: int, k: int = SAMPLE_ROWS) -> tuple[int, ...]:
    """Up to ``k`` evenly spaced query rows, the first and last included."""
    return tuple(sorted({int(r) for r in np.linspace(0, n - 1, num=min(k, n))}))


@dataclass(frozen=True)
class Fidelity:
    """The measured fidelity of a run's patterns, layer by layer.

    Attributes:
        errors: each layer's relative error (None where it could not be measured).
        rows: the query rows sampled.
        tolerance: the most a drawn run may show.
        reference: what the patterns were compared with, in words.
        architecture: the model's architecture (for the refusal).
    """

    errors: tuple[float | None, ...]
    rows: tuple[int, ...]
    tolerance: float
    reference: str
    architecture: str

    @property
    def worst(self) -> tuple[int, float] | None:
        """The layer with the largest measured error and that error (None: nothing measured)."""
        measured = [(e, layer) for layer, e in enumerate(self.errors) if e is not None]
        if not measured:
            return None
        error, layer = max(measured)
        return layer, error

    @property
    def passes(self) -> bool:
        worst = self.worst
        return worst is None or worst[1] <= self.tolerance

    def text(self) -> str:
        """One sentence for the page."""
        worst = self.worst
        unmeasured = sum(e is None for e in self.errors)
        if worst is None:
            return "Fidelity not measured: no layer's output could be read back for this model."
        layer, error = worst
        skipped = f"; {unmeasured} layers could not be measured" if unmeasured else ""
        return (
            f"Fidelity: the patterns shown reproduce each layer's output to within {error:.1e} "
            f"(relative, worst: layer {layer}; {len(self.rows)} sampled rows per layer; "
            f"tolerance {self.tolerance:.0e}) against {self.reference}{skipped}."
        )

    def refusal(self) -> str | None:
        """Why the views are not drawn, or None when the run passes."""
        if self.passes:
            return None
        layer, error = self.worst or (0, 0.0)
        return (
            f"The patterns read from {self.architecture} do not reproduce its attention output: "
            f"relative error {error:.2g} on layer {layer}, above the tolerance "
            f"{self.tolerance:.0e}. The views are not drawn."
        )


def relative(got: torch.Tensor, real: torch.Tensor) -> float:
    """``||got - real|| / ||real||`` (0 when both are 0)."""
    scale = float(torch.linalg.vector_norm(real.to(torch.float64)))
    diff = float(torch.linalg.vector_norm((got - real).to(torch.float64)))
    return diff / scale if scale > 0 else diff


def softmax_layer_error(
    rows_shown: Float[np.ndarray, "head_index row key_pos"],
    reference: EagerLayer,
    rows: tuple[int, ...],
    gate: Float[np.ndarray, "head_index row d_head"] | None = None,
) -> float:
    """One softmax layer's relative error: shown rows times values (times the gate), through
    the output projection, against the projection's real output on those rows."""
    assert reference.value is not None and reference.z is not None and reference.out is not None
    value = reference.value[0].to(torch.float32)  # kv_head key_pos d_v
    weights = torch.from_numpy(np.nan_to_num(np.asarray(rows_shown, dtype=np.float32)))
    n_heads, n_kv = weights.shape[0], value.shape[0]
    heads = torch.einsum("hrk,hkd->hrd", weights, value.repeat_interleave(n_heads // n_kv, dim=0))
    if gate is not None:
        heads = heads * torch.from_numpy(np.asarray(gate, dtype=np.float32))
    z = heads.transpose(0, 1).reshape(len(rows), -1)  # row head*d_v, as the model merges them
    projection = reference.projection
    dtype = reference.z.dtype
    with torch.no_grad():
        zero = projection(torch.zeros_like(reference.z[0, :1]))
        got = projection(z.to(dtype)[None])[0] - zero
    real = reference.out[0, list(rows)] - zero
    return relative(got.to(torch.float32), real.to(torch.float32))


def linear_layer_error(
    mixing: Float[np.ndarray, "v_head query_pos key_pos"],
    value: Float[torch.Tensor, "pos v_head d_v"],
    output: Float[torch.Tensor, "pos v_head d_v"],
    rows: tuple[int, ...],
) -> float:
    """One linear-attention layer's relative error: ``M v`` against the layer's own output."""
    m = torch.from_numpy(np.array(mixing, dtype=np.float32)[:, list(rows)])
    got = torch.einsum("hrs,shd->rhd", m, value.to(torch.float32))
    return relative(got, output[list(rows)].to(torch.float32))


def measure(
    n_layers: int,
    rows: tuple[int, ...],
    shown: Callable[[int], np.ndarray | None],
    reference: dict[int, EagerLayer],
    gates: dict[int, np.ndarray],
    linear: dict[int, float],
    dtype: str,
    architecture: str,
) -> Fidelity:
    """Every layer's error (see the module docstring).

    Args:
        n_layers: layers in the model.
        rows: the sampled query rows.
        shown: ``head_index row key_pos`` weights of those rows of a softmax layer (None for a
            linear layer).
        reference: the eager pass's record of each softmax layer.
        gates: ``head_index query_pos d_head`` sigmoid gates of gated layers.
        linear: the errors of linear layers, already measured.
        dtype: the dtype the model ran in (sets the tolerance).
        architecture: the model's architecture, for the refusal.
    """
    errors: list[float | None] = []
    for layer in range(n_layers):
        if layer in linear:
            errors.append(linear[layer])
            continue
        weights = shown(layer)
        if weights is None or layer not in reference:
            errors.append(None)
            continue
        gate = gates[layer][:, list(rows)] if layer in gates else None
        errors.append(softmax_layer_error(weights, reference[layer], rows, gate))
    return Fidelity(
        errors=tuple(errors),
        rows=rows,
        tolerance=tolerance(dtype),
        reference="the model's own attention output in transformers (eager)",
        architecture=architecture,
    )
