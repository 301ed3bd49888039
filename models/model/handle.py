"""The handle every model-sized computation takes: what it may read of a loaded model.

:class:`ModelHandle` is the narrow interface between the core and the library that runs the
model. It offers the request (:class:`~models.model.spec.ModelSpec`), the shape facts
(:class:`~models.model.facts.ModelFacts`: layers, heads, key/value groups, vocabulary, the
dense-capture limit), the tokenizer, the forward lock and the per-model memo. It offers no way
to the TransformerLens bridge: only :mod:`models.model` reaches it, through
:func:`models.model.loading.bridge_of`, so code outside that package is type-checked against
this protocol and cannot depend on the bridge's shape of the week. Tensors leave the package
only through :mod:`models.model`'s functions, whose signatures carry their shapes.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from models.model.facts import ModelFacts
from models.model.spec import ModelSpec

__all__ = ["ModelHandle"]


class ModelHandle(Protocol):
    """A loaded model as the core sees it (one per model, shared by every session)."""

    @property
    def spec(self) -> ModelSpec:
        """What was asked for: name, dtype, device."""
        ...

    @property
    def facts(self) -> ModelFacts:
        """Shape and attention behaviour, read once at load."""
        ...

    @property
    def source(self) -> str:
        """The directory or hub name the weights were read from."""
        ...

    @property
    def lock(self) -> threading.Lock:
        """Held by every forward pass, so one run's hooks are never seen by another."""
        ...

    @property
    def memo(self) -> dict[str, Any]:
        """Facts probed once per model (see :func:`models.model.forward.qk_source`)."""
        ...

    @property
    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer."""
        ...

    @property
    def nbytes(self) -> int:
        """Memory the weights take."""
        ...
