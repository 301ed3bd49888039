"""Loaded models, shared by every session: only an :class:`~ui.runtime.policy.AllowedSpec`
loads one.

At most three models and ``ATLAS_MODEL_MB`` of weights stay loaded (the least recently used
goes first), and a model nobody used for ``ATLAS_IDLE_S`` seconds is dropped by the janitor.
Every load goes through :func:`models.model.loading.load`, which checks the model against free
memory before reading a weight and takes the process-wide load lock. No Streamlit here.
"""

from __future__ import annotations

from pathlib import Path

from models.model.gguf import is_converted
from models.model.handle import ModelHandle
from models.model.loading import LoadedModel, load
from models.progress import Progress, quiet
from ui.runtime.policy import AllowedSpec
from ui.runtime.store import ResultStore


class ModelStore:
    """The models this server holds, keyed by the allowed spec they were loaded from."""

    def __init__(self, max_bytes: int, cache: Path) -> None:
        self.store = ResultStore(max_entries=3, max_bytes=max_bytes)
        self.cache = cache

    def get(self, allowed: AllowedSpec, progress: Progress = quiet) -> ModelHandle:
        """The model for ``allowed``, loaded on first use.

        Raises:
            TypeError: ``allowed`` did not come through the operator's policy.
            ModelLoadError: it could not be loaded (with a message for the page).
        """
        if not isinstance(allowed, AllowedSpec):
            raise TypeError("Models load only from an AllowedSpec (ui.runtime.policy.admit).")
        model = self.store.get_or_compute(allowed, lambda: load(allowed.spec, progress, self.cache))
        assert isinstance(model, LoadedModel)  # the store holds only models, under specs
        return model

    def loaded(self, allowed: AllowedSpec) -> ModelHandle | None:
        """The model if it is loaded now, without loading it."""
        found = self.store.get(allowed)
        return found if isinstance(found, LoadedModel) else None

    def needs_conversion(self, allowed: AllowedSpec) -> Path | None:
        """The GGUF file ``allowed`` must be converted from first, or None."""
        path = allowed.spec.gguf_file
        return None if path is None or is_converted(path, self.cache) else path
