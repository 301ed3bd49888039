"""What the operator lets a visitor do on this server: settings read from the environment.

A visitor types model names and paths and opens links; the operator decides, per server:

- ``ATLAS_ALLOW_REMOTE_CODE=1``: show the "Trust remote code" box (off by default: code from a
  model repository never runs because of a visitor);
- ``ATLAS_MODEL_ROOTS=/dir1:/dir2``: the folders local model directories and GGUF files may come
  from (default: the Hugging Face cache and the app's own model cache). Anything else gets one
  message, whether or not it exists, so the page never tells which server paths exist;
- ``ATLAS_MAX_TOKENS=N``: the most prompt tokens a visitor's prompt is run on (default: the
  model's context);
- ``ATLAS_HEAVY_JOBS``, ``ATLAS_RESULT_MB``, ``ATLAS_MODEL_MB``, ``ATLAS_IDLE_S``: the worker
  pool, the memory budgets and how long unused results and models stay (see README "Security").

No Streamlit here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from models.errors import ModelLoadError
from models.model.spec import ModelSpec

HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9._-]{1,96})?$")


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def allow_remote_code() -> bool:
    return _flag("ATLAS_ALLOW_REMOTE_CODE")


def max_prompt_tokens() -> int | None:
    raw = os.environ.get("ATLAS_MAX_TOKENS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def model_roots() -> list[Path]:
    """Folders visitors may load local models from (resolved)."""
    raw = os.environ.get("ATLAS_MODEL_ROOTS")
    if raw:
        parts = [p for p in raw.split(os.pathsep) if p.strip()]
    else:
        from huggingface_hub import constants

        from models.model.gguf import cache_dir
        parts = [constants.HF_HUB_CACHE, str(cache_dir())]
    return [Path(p).expanduser().resolve() for p in parts]


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def visitor_spec(spec: ModelSpec) -> ModelSpec:
    """``spec`` as this server will load it for a visitor, or a ModelLoadError saying why not.

    Local paths are resolved (so one directory is one cached model however it is spelled) and
    must lie under :func:`model_roots`; hub names must be valid Hugging Face names; remote code
    is dropped unless the operator allows it.

    Raises:
        ModelLoadError: a path outside the allowed folders, or not a usable name.
    """
    name = spec.name.strip()
    if not allow_remote_code() and spec.trust_remote_code:
        spec = ModelSpec(name, spec.device, spec.dtype, False, spec.device_map)
    if spec.kind in ("bundled", "minilm", "smollm2"):
        return spec
    if spec.kind == "hub":
        if not HUB_NAME.match(name) or ".." in name:
            raise ModelLoadError("That is not a Hugging Face model name (owner/name, letters, "
                                 "digits, '-', '_' and '.', at most 96 characters each).")
        return spec
    try:
        resolved = Path(name).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        resolved = None
    if resolved is None or not _inside(resolved, model_roots()):
        raise ModelLoadError(
            "This server loads local models only from the folders its operator allows, and "
            "that path is not in one of them. Choose a bundled model or a Hugging Face name, or "
            "ask the operator to add the folder to ATLAS_MODEL_ROOTS.")
    return ModelSpec(str(resolved), spec.device, spec.dtype, spec.trust_remote_code,
                     spec.device_map)
