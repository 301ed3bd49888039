"""The app's attention kernel run on the model's own q, k, v, compared head by head.

For every layer the kernel (:func:`models.attention.attention`) gets the captured q, k, v (see
:mod:`models.attention.inputs` for where they come from) with the model's own scale, mask, ALiBi
slopes and window. Its pattern is rebuilt from the returned LSE with
:func:`models.attention.rebuild_pattern` and compared with ``hook_pattern``; its output with
``hook_z``. Both errors are the largest absolute difference over one head's entries.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import torch

from models.attention.api import Backend, BackendName, attention, choose_backend
from models.attention.inputs import KernelInputs, capture_inputs
from models.attention.pattern import rebuild_pattern
from models.attention.timing import Timing, device_label, time_implementations
from models.errors import UserError
from models.model.handle import ModelHandle
from models.model.spec import TORCH_DTYPES

KernelDType = Literal["float32", "float16", "bfloat16"]
TOLERANCES: dict[str, float] = {"float32": 1e-5, "float16": 5e-3, "bfloat16": 5e-2}
BACKEND_WORDS: dict[str, str] = {
    "triton-gpu": "Triton kernel, compiled for the GPU",
    "triton-interpreter": "Triton kernel in Triton's CPU interpreter",
    "torch-tiled": "tiled PyTorch path (the kernel's algorithm, exact, any device)",
}


class KernelFailed(UserError):
    """The kernel itself failed to run on this machine (a Triton compile error, say)."""


@dataclass(frozen=True)
class KernelReport:
    """Kernel vs model, every head, plus what ran where and how long it took.

    Attributes:
        backend: which implementation ran.
        device, device_text: where it ran (``"cpu"``/``"cuda"`` and a readable name).
        dtype: the dtype q, k, v were cast to for the kernel.
        tokens: readable label of each position.
        pattern_error: ``layer head_index`` max ``|P_kernel - P_model|``.
        output_error: ``layer head_index`` max ``|O_kernel - z_model|``.
        model_patterns, kernel_patterns: ``layer head_index query_pos key_pos`` float32.
        inputs_note: where q/k and the scale came from; reference_error: the float64 rebuild's
            own distance from ``hook_pattern`` (the floor any kernel error sits on).
        tolerance: the error expected from rounding in this dtype (model's and kernel's).
        timings: kernel, SDPA and naive attention on layer ``timing_layer``'s tensors.
    """

    backend: BackendName
    device: str
    device_text: str
    dtype: KernelDType
    tokens: tuple[str, ...]
    pattern_error: np.ndarray
    output_error: np.ndarray
    model_patterns: np.ndarray
    kernel_patterns: np.ndarray
    scales: tuple[float, ...]
    causal: bool
    inputs_note: str
    reference_error: float
    tolerance: float
    timings: tuple[Timing, ...]
    timing_layer: int
    n_prompt_tokens: int

    @property
    def max_pattern_error(self) -> float:
        return float(self.pattern_error.max())

    @property
    def max_output_error(self) -> float:
        return float(self.output_error.max())

    @property
    def within_tolerance(self) -> bool:
        return self.max_pattern_error <= self.tolerance and self.max_output_error <= self.tolerance

    def head_rows(self) -> list[dict[str, object]]:
        """One row per head: ``L.H`` and both errors (for a sortable table)."""
        n_layers, n_heads = self.pattern_error.shape
        return [
            {
                "head": f"{layer}.{head}",
                "layer": layer,
                "head index": head,
                "max |P_kernel - P_model|": float(self.pattern_error[layer, head]),
                "max |O_kernel - z_model|": float(self.output_error[layer, head]),
            }
            for layer in range(n_layers)
            for head in range(n_heads)
        ]

    def timing_rows(self) -> list[dict[str, object]]:
        fastest = min(t.median_ms for t in self.timings)
        return [
            {
                "implementation": t.name,
                "median ms": t.median_ms,
                "× fastest": t.median_ms / fastest,
                "repeats": t.repeats,
                "device": self.device_text,
            }
            for t in self.timings
        ]


def kernel_device(device: str | None = None) -> torch.device:
    """``device`` as asked, or the GPU when there is one and the CPU otherwise."""
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def tolerance(kernel_dtype: str, model_dtype: str) -> float:
    """Rounding-sized error for a kernel in ``kernel_dtype`` against hooks of a ``model_dtype``
    run."""
    return max(TOLERANCES[kernel_dtype], TOLERANCES.get(model_dtype, TOLERANCES["float32"]))


def run_layer(
    inputs: KernelInputs,
    layer: int,
    *,
    dtype: KernelDType = "float32",
    device: torch.device | str = "cpu",
    backend: Backend = "auto",
    scale_factor: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, BackendName]:
    """Run the kernel on one layer and rebuild its whole pattern from the LSE.

    Args:
        inputs: captured inputs.
        layer: which layer.
        dtype: dtype q, k, v are cast to.
        device: where the kernel runs.
        backend: kernel backend request (``"auto"``, ``"triton"``, ``"torch"``).
        scale_factor: multiplies the model's scale for the kernel only; 1.0 is the real
            comparison (other values show what a wrong scale does to the errors).

    Returns:
        ``out`` (``batch head_index query_pos d_head`` float32 on CPU), the rebuilt ``pattern``
        (``batch head_index query_pos key_pos`` float32 on CPU), and the backend that ran.
    """
    torch_dtype = TORCH_DTYPES[dtype]
    q, k, v = (
        t[layer].to(device=device, dtype=torch_dtype) for t in (inputs.q, inputs.k, inputs.v)
    )
    slopes = inputs.alibi_slopes
    options = replace(
        inputs.options(layer),
        scale=inputs.scales[layer] * scale_factor,
        alibi=None if slopes is None else slopes.to(device),
    )
    with torch.no_grad():
        out, lse = attention(q, k, v, options, backend=backend)
        pattern = rebuild_pattern(q, k, lse, slice(None), slice(None), options)
    return out.float().cpu(), pattern.cpu(), choose_backend(q, backend)


def compare(
    inputs: KernelInputs,
    *,
    dtype: KernelDType = "float32",
    device: str | None = None,
    backend: Backend = "auto",
    scale_factor: float = 1.0,
    timing_layer: int = 0,
    timing_repeats: int = 5,
) -> KernelReport:
    """Run the kernel on every layer and measure its distance from the model, head by head.

    Args:
        inputs: from :func:`models.attention.inputs.capture_inputs`.
        dtype: dtype q, k, v are cast to for the kernel.
        device: ``"cpu"`` / ``"cuda"``; None picks the GPU when present.
        backend: kernel backend request.
        scale_factor: multiplies the model's scale for the kernel (1.0 = the real check).
        timing_layer: the layer whose tensors are timed.
        timing_repeats: timed calls per implementation.

    Returns:
        A :class:`KernelReport`.
    """
    where = kernel_device(device)
    pattern_err, output_err, kernel_patterns = [], [], []
    name: BackendName = choose_backend(torch.empty(0, device=where), backend)
    for layer in range(inputs.n_layers):
        out, pattern, name = run_layer(
            inputs, layer, dtype=dtype, device=where, backend=backend, scale_factor=scale_factor
        )
        pattern_err.append((pattern - inputs.patterns[layer]).abs().amax(dim=(0, 2, 3)))
        output_err.append((out - inputs.z[layer]).abs().amax(dim=(0, 2, 3)))
        kernel_patterns.append(pattern[0])
    torch_dtype = TORCH_DTYPES[dtype]
    q, k, v = (t[timing_layer].to(where, torch_dtype) for t in (inputs.q, inputs.k, inputs.v))
    slopes = None if inputs.alibi_slopes is None else inputs.alibi_slopes.to(where)
    timings = time_implementations(
        q,
        k,
        v,
        replace(inputs.options(timing_layer), alibi=slopes),
        backend=backend,
        repeats=timing_repeats,
    )
    return KernelReport(
        backend=name,
        device=where.type,
        device_text=device_label(where),
        dtype=dtype,
        tokens=inputs.tokens,
        pattern_error=torch.stack(pattern_err).numpy(),
        output_error=torch.stack(output_err).numpy(),
        model_patterns=inputs.patterns[:, 0].numpy(),
        kernel_patterns=torch.stack(kernel_patterns).numpy(),
        scales=tuple(s * scale_factor for s in inputs.scales),
        causal=inputs.causal,
        inputs_note=f"q/k from {inputs.qk_source}; scale from {inputs.scale_source}",
        reference_error=inputs.reference_error,
        tolerance=tolerance(dtype, inputs.model_dtype),
        timings=timings,
        timing_layer=timing_layer,
        n_prompt_tokens=inputs.n_prompt_tokens,
    )


def check_kernel(
    model: ModelHandle,
    prompt: str,
    *,
    max_tokens: int | None = None,
    dtype: KernelDType = "float32",
    device: str | None = None,
    backend: Backend = "auto",
) -> KernelReport:
    """Capture the model's inputs on ``prompt`` and compare the kernel against them.

    Raises:
        PromptError: empty or oversized prompt.
        KernelUnavailable: the model's attention cannot be fed to the kernel faithfully.
        KernelFailed: the kernel did not run here.
    """
    inputs = capture_inputs(model, prompt, max_tokens)
    try:
        return compare(inputs, dtype=dtype, device=device, backend=backend)
    except (RuntimeError, ValueError) as err:  # e.g. a Triton compile failure on an odd GPU
        raise KernelFailed(f"The kernel could not run here: {err}") from err
