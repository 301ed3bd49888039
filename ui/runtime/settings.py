"""Every setting the operator gives the server, read once from ``ATLAS_*`` environment variables.

:class:`Settings` is frozen: it is read when the server starts (:func:`ui.runtime.server.start`)
and handed to whatever needs it, so no module reads the environment on its own and a setting
cannot change under a running job. Each field names its variable and the default the README's
settings table shows; a test keeps that table and this class the same. No Streamlit here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

MIB = 1024**2
T = TypeVar("T")
# what one environment setting parses to (None: it does not parse)
Parsed = bool | float | str | Path | tuple[Path, ...] | None


def _setting(env: str, default: T, readme: str, text: str) -> T:
    """A field read from ``env``; ``readme`` is the default as the README's table writes it."""
    return field(default=default, metadata={"env": env, "readme": readme, "text": text})


def default_cache() -> Path:
    return Path.home() / ".cache" / "attention-atlas"


@dataclass(frozen=True)
class Settings:
    """What the operator allows and how much the server may use (see README, "Security")."""

    allow_remote_code: bool = _setting(
        "ATLAS_ALLOW_REMOTE_CODE",
        False,
        "off",
        "show *Trust remote code* (models that ship Python)",
    )
    model_roots: tuple[Path, ...] | None = _setting(
        "ATLAS_MODEL_ROOTS",
        None,
        "HF cache, app cache",
        "folders local models and GGUF files may come from (colon-separated)",
    )
    max_tokens: int | None = _setting(
        "ATLAS_MAX_TOKENS", None, "the model's context", "the most tokens a prompt is run on"
    )
    heavy_jobs: int = _setting("ATLAS_HEAVY_JOBS", 1, "1", "heavy jobs run at once")
    model_mb: int = _setting("ATLAS_MODEL_MB", 8192, "8,192", "memory for loaded models")
    result_mb: int = _setting(
        "ATLAS_RESULT_MB", 1536, "1,536", "memory for kept results (runs, reports, scores)"
    )
    job_mb: int = _setting(
        "ATLAS_JOB_MB",
        4096,
        "4,096",
        "the most memory one job may need; larger requests are refused",
    )
    job_max_s: float = _setting(
        "ATLAS_JOB_MAX_S", 900.0, "900", "the longest one job may be estimated to take"
    )
    jobs_per_session: int = _setting(
        "ATLAS_JOBS_PER_SESSION", 3, "3", "jobs one browser session may have queued or running"
    )
    idle_s: float = _setting(
        "ATLAS_IDLE_S", 600.0, "600", "seconds before an unused model or result is dropped"
    )
    job_wait_s: float = _setting(
        "ATLAS_JOB_WAIT_S", 1.0, "1", "seconds a page waits for work before showing progress"
    )
    cache: Path = _setting(  # noqa: RUF009 (the home folder, read once: a path, immutable)
        "ATLAS_CACHE",
        default_cache(),
        "`~/.cache/attention-atlas`",
        "converted GGUF checkpoints, exports, long prompts, kept results",
    )
    disk_mb: int = _setting(
        "ATLAS_DISK_MB", 16384, "16,384", "disk for the app's cache folder (oldest files go first)"
    )
    ray_address: str | None = _setting(
        "ATLAS_RAY_ADDRESS",
        None,
        "off",
        "a Ray cluster (`host:port`) that runs the heavy work; off: all in this process",
    )
    ray_gpus: float = _setting(
        "ATLAS_RAY_GPUS",
        1.0,
        "1",
        "GPUs one GPU model's worker takes on the cluster (fractions share a GPU)",
    )
    ray_model_mb: int | None = _setting(
        "ATLAS_RAY_MODEL_MB",
        None,
        "none",
        "memory the cluster reserves for one model's worker",
    )
    ray_result_mb: int = _setting(
        "ATLAS_RAY_RESULT_MB",
        1536,
        "1,536",
        "memory for the results every front end of the cluster shares",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``environ`` (the process environment by default).

        Unparseable or out-of-range values fall back to the default: a typo in a setting never
        stops the server, and never widens what a visitor may do.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}  # each value parsed to its own field's type
        for spec in fields(cls):
            raw = env.get(spec.metadata["env"], "").strip()
            if raw:
                parsed = _parse(spec.name, raw)
                if parsed is not None:
                    values[spec.name] = parsed
        return cls(**values)

    def roots(self) -> tuple[Path, ...]:
        """Folders visitors may load local models from, resolved (default: the Hugging Face
        cache and the app cache)."""
        if self.model_roots is not None:
            return self.model_roots
        from huggingface_hub import constants

        return (Path(constants.HF_HUB_CACHE).expanduser().resolve(), self.cache.resolve())

    @property
    def result_bytes(self) -> int:
        return self.result_mb * MIB

    @property
    def model_bytes(self) -> int:
        return self.model_mb * MIB

    @property
    def job_bytes(self) -> int:
        return self.job_mb * MIB

    @property
    def disk_bytes(self) -> int:
        return self.disk_mb * MIB

    @property
    def ray_result_bytes(self) -> int:
        return self.ray_result_mb * MIB


def _parse(name: str, raw: str) -> Parsed:
    """``raw`` as the type of field ``name``, or None when it does not parse or is out of range."""
    if name == "allow_remote_code":
        return raw.lower() in ("1", "true", "yes", "on")
    if name == "model_roots":
        parts = [p for p in raw.split(os.pathsep) if p.strip()]
        try:
            return tuple(Path(p).expanduser().resolve() for p in parts) or None
        except (OSError, RuntimeError, ValueError):
            return None
    if name == "cache":
        return Path(raw).expanduser()
    if name == "ray_address":  # host:port, or ray://host:port for Ray's client
        return raw if re.fullmatch(r"(ray://)?[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}", raw) else None
    try:
        number = float(raw)
    except ValueError:
        return None
    if number != number or number == float("inf"):
        return None
    if name == "job_wait_s":  # 0: every job shows its progress at once
        return number if number >= 0 else None
    if not number > 0:
        return None
    if name in (
        "max_tokens",
        "heavy_jobs",
        "model_mb",
        "result_mb",
        "job_mb",
        "jobs_per_session",
        "disk_mb",
        "ray_model_mb",
        "ray_result_mb",
    ):
        return int(number) if number >= 1 else None
    return number


def readme_rows() -> list[tuple[str, str, str]]:
    """``(variable, default, what it does)`` for every setting, as the README table lists them."""
    return [(f.metadata["env"], f.metadata["readme"], f.metadata["text"]) for f in fields(Settings)]
