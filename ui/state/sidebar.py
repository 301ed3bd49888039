"""The sidebar's model choice as one frozen value, and the spec it asks for. No Streamlit here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from models.model.spec import BUNDLED, MINILM, SMOLLM2, DType, ModelSpec

Source = Literal["bundled", "smollm2", "minilm", "hub", "local", "gguf"]
Placement = Literal["one", "auto", "balanced", "sequential"]
SOURCES: tuple[Source, ...] = get_args(Source)
PLACEMENTS: tuple[Placement, ...] = get_args(Placement)
NAMED: tuple[Source, ...] = (BUNDLED, SMOLLM2, MINILM)
SOURCE_LABELS: dict[Source, str] = {
    "bundled": "Bundled GPT-2 (offline)",
    "smollm2": "SmolLM2-135M (offline)",
    "minilm": "all-MiniLM-L6-v2 (encoder)",
    "hub": "Hugging Face name",
    "local": "Local directory",
    "gguf": "GGUF file",
}
TYPED: dict[Source, tuple[str, str]] = {
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

    source: Source = "bundled"
    name: str = ""
    device: Literal["cpu", "cuda"] = "cpu"
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


def source_of(model: str) -> tuple[Source, str]:
    """The sidebar source and typed name that open ``model`` (a link's ``model=`` value)."""
    if model in NAMED:
        return model, ""  # type: ignore[return-value]  # NAMED holds sources
    kind = ModelSpec(model).kind
    return ("gguf" if kind == "gguf" else "local" if kind == "local" else "hub"), model
