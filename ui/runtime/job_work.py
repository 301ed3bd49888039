"""The work a job key stands for, computed from the key's fields alone (what a cluster worker
runs).

A page hands the pool its work as a closure over the loaded model; a Ray worker
(:mod:`ui.runtime.cluster`) has only the key, so each kind it can run is registered here with
how to find its model (:func:`spec_of`) and how to compute its result from the model and the
key's validated fields (:func:`compute`): the same calls the pages make. A key kind not
registered here always runs in the front end's own pool. No Streamlit, no Ray here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar, overload

import numpy as np

from models.capture.run import AttentionRun, capture
from models.circuits.patching import Baseline, baseline, head_effects, position_effects
from models.circuits.task import prepare
from models.model.handle import ModelHandle
from models.progress import Progress
from ui.runtime.job_keys import CircuitKey, HeadPatchKey, PositionPatchKey, RunKey
from ui.runtime.policy import AllowedSpec
from ui.runtime.store import JobKey

R = TypeVar("R")


class Resolve(Protocol):
    """The result of another key the work builds on, of the type that key declares."""

    def __call__(self, key: JobKey[R], /) -> R: ...


Compute = Callable[[ModelHandle, Any, Resolve, Progress], object]

_WORK: dict[type, tuple[Callable[[Any], AllowedSpec], Compute]] = {}


def register(kind: type, spec: Callable[[Any], AllowedSpec]) -> Callable[[Compute], Compute]:
    """Register ``compute`` as the work of key class ``kind``, whose model is ``spec(key)``."""

    def add(compute: Compute) -> Compute:
        _WORK[kind] = (spec, compute)
        return compute

    return add


def runs(key: object) -> bool:
    """Whether ``key``'s kind can be computed from the key alone (so on a cluster worker)."""
    return type(key) in _WORK


def spec_of(key: JobKey[Any]) -> AllowedSpec:
    """The model ``key``'s work runs on.

    Raises:
        KeyError: a kind not registered here.
    """
    return _WORK[type(key)][0](key)


@overload
def compute(key: JobKey[R], model: ModelHandle, resolve: Resolve, progress: Progress) -> R: ...


@overload
def compute(key: Hashable, model: ModelHandle, resolve: Resolve, progress: Progress) -> object: ...


def compute(key: Hashable, model: ModelHandle, resolve: Resolve, progress: Progress) -> object:
    """``key``'s result, computed on ``model`` (``resolve`` gives the keys it builds on): the
    work registered for ``key``'s class, which returns what that class declares.

    Raises:
        KeyError: a kind not registered here.
    """
    return _WORK[type(key)][1](model, key, resolve, progress)


@register(RunKey, lambda key: key.spec)
def _capture(
    model: ModelHandle, key: RunKey, _resolve: Resolve, progress: Progress
) -> AttentionRun:
    return capture(model, key.prompt, max_tokens=key.max_tokens, progress=progress)


@register(CircuitKey, lambda key: key.spec)
def _baseline(
    model: ModelHandle, key: CircuitKey, _resolve: Resolve, progress: Progress
) -> Baseline:
    return baseline(model, prepare(model, key.task), progress=progress)


@register(HeadPatchKey, lambda key: key.circuit.spec)
def _head_patch(
    model: ModelHandle, key: HeadPatchKey, resolve: Resolve, progress: Progress
) -> np.ndarray:
    setup = prepare(model, key.circuit.task)
    return head_effects(model, setup, resolve(key.circuit), progress=progress)


@register(PositionPatchKey, lambda key: key.circuit.spec)
def _position_patch(
    model: ModelHandle, key: PositionPatchKey, resolve: Resolve, progress: Progress
) -> np.ndarray:
    setup, head = prepare(model, key.circuit.task), key.head
    base = resolve(key.circuit)
    return position_effects(model, setup, base, head.layer, head.index, progress=progress)
