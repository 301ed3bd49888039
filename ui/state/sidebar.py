"""The sidebar's model choice as one frozen value, and the spec it asks for. No Streamlit here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal, get_args

from models.model.hardware import LowPrecision
from models.model.spec import BUNDLED, MINILM, SMOLLM2, Device, DType, ModelSpec, SourceKind

Placement = Literal["one", "auto", "balanced", "sequential"]
SOURCES: tuple[SourceKind, ...] = ("bundled", "smollm2", "minilm", "hub", "local", "gguf")
DTYPES: tuple[DType, ...] = ("float32", "bfloat16", "float16")  # as the sidebar lists them
PLACEMENTS: tuple[Placement, ...] = get_args(Placement)
NAMED: tuple[SourceKind, ...] = ("bundled", "smollm2", "minilm")
assert NAMED == (BUNDLED, SMOLLM2, MINILM)  # the named models' spec names are their sources
FAST_RATIO = 1.2  # a measured matmul rate this many times float32's makes a type the fast one
SOURCE_LABELS: dict[SourceKind, str] = {
    "bundled": "Bundled GPT-2 (offline)",
    "smollm2": "SmolLM2-135M (offline)",
    "minilm": "all-MiniLM-L6-v2 (encoder)",
    "hub": "Hugging Face name",
    "local": "Local directory",
    "gguf": "GGUF file",
}
TYPED: dict[SourceKind, tuple[str, str]] = {
    "hub": ("Hugging Face name", "gpt2, EleutherAI/pythia-70m"),
    "local": ("Directory (Hugging Face format)", "/path/to/model"),
    "gguf": ("Path to a .gguf file", "/path/to/model.Q4_K_M.gguf"),
}
PLACEMENT_LABELS: dict[Placement, str] = {
    "one": "One device",
    "auto": "Spread over devices (auto)",
    "balanced": "Spread evenly (balanced)",
    "sequential": "Fill devices in order (sequential)",
}


@dataclass(frozen=True)
class ModelChoice:
    """What the sidebar's model widgets say."""

    source: SourceKind = "bundled"
    name: str = ""
    device: Device = "cpu"
    dtype: DType = "float32"
    placement: Placement = "one"
    trust: bool = False

    def spec(self, remote_code_allowed: bool) -> ModelSpec | None:
        """The model asked for, or None while a typed name is still empty."""
        name = self.source if self.source in NAMED else self.name.strip()
        if not name:
            return None
        trust = self.trust and self.source in ("hub", "local") and remote_code_allowed
        return ModelSpec(
            name=name,
            device=self.device,
            dtype=self.dtype,
            trust_remote_code=trust,
            device_map=None if self.placement == "one" else self.placement,
        )


DEFAULT_CHOICE = ModelChoice()  # what the sidebar shows when no link says otherwise


def choice_from_link(model: str | None, dtype: DType) -> ModelChoice:
    """The sidebar's choice a link opens: its model and dtype, the rest as by default (a link
    never switches on remote code, and the device and placement are the server's own)."""
    source, name = source_of(model or DEFAULT_CHOICE.source)
    return replace(DEFAULT_CHOICE, source=source, name=name, dtype=dtype)


def source_of(model: str) -> tuple[SourceKind, str]:
    """The sidebar source and typed name that open ``model`` (a link's ``model=`` value)."""
    if model in NAMED:
        return NAMED[NAMED.index(model)], ""
    kind = ModelSpec(model).kind
    return ("gguf" if kind == "gguf" else "local" if kind == "local" else "hub"), model


def half_type(dtype: DType) -> Literal["bfloat16", "float16"]:
    """The low-precision type the dtype note speaks of: float16 when chosen, else bfloat16."""
    return "float16" if dtype == "float16" else "bfloat16"


def dtype_note(dtype: DType, support: LowPrecision, rates: Mapping[str, float] | None) -> str:
    """One line under the dtype choice: whether ``support.dtype`` is native on this device and,
    where measured, how fast its matrix products are against float32's.

    Args:
        dtype: the chosen dtype.
        support: :func:`models.model.hardware.low_precision` of :func:`half_type` ``(dtype)``.
        rates: measured GFLOP/s by dtype (:func:`models.model.hardware.matmul_rates`), or None.
    """
    half, where = support.dtype, "this GPU" if support.device == "cuda" else "this CPU"
    if not support.native:
        return f"{half} is emulated on {where}: slower than float32 here."
    base, fast = (rates or {}).get("float32"), (rates or {}).get(half)
    ratio = fast / base if base and fast else None
    speed = f", about {ratio:.1f}× float32's matmul rate" if ratio is not None else ""
    text = f"{half}: native on {where} ({support.how}){speed}"
    if ratio is not None and ratio < FAST_RATIO:
        return text + ": no faster than float32 here."
    if dtype == half:
        return text + ". Patterns are still computed in float32."
    return text + ": the fast choice."
