"""A bounded, thread-safe store for finished results and loaded models, and the typed keys
results are filed under.

Work files its result here only once it has finished: an interrupted run leaves nothing behind,
so partial work is never served as complete. Keys hold everything that changes the result. The
store is bounded in entries and in bytes and drops what nobody used for a while; what an open
browser session is showing right now is *pinned* and goes last, so one visitor filling the store
with new prompts evicts their own old results before anyone else's view. When only pinned
results are left to take, the visitor (a client address: every tab of one browser) holding the
most pinned bytes gives one up first, so four tabs pinning large results push out their own
before a fifth visitor's run. No Streamlit here.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, overload

import numpy as np

R = TypeVar("R")

PINS_PER_SESSION = 8  # what one session can be showing at once (a run, its weighting, a report)
_DEPTH = 6


@dataclass(frozen=True)
class JobKey(Generic[R]):
    """What a job computes, and (its type parameter) the type of its result. Each kind of work
    is a frozen subclass holding every input that changes its result (see
    :mod:`ui.runtime.job_keys`); the class is the kind. A kind whose results are worth keeping
    across restarts sets ``persist = True``."""

    persist: ClassVar[bool] = False

    @property
    def kind(self) -> str:
        return type(self).__name__


def size_of(value: Any, _depth: int = 0, _seen: set[int] | None = None) -> int:
    """Bytes a result holds: arrays and tensors by the buffers they keep alive, strings and bytes
    by length, containers, dataclasses and plain objects by what they hold (each object counted
    once).

    An object that states ``nbytes`` is taken at its word. Deeper than a few levels, or a
    model, counts nothing: the store holds results, and models are counted by their own store.
    """
    seen = set() if _seen is None else _seen
    if id(value) in seen or _depth > _DEPTH or value is None:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray) or _is_tensor(value):
        return _held_bytes(value, seen)
    stated = getattr(value, "nbytes", None)
    if isinstance(stated, int) and not isinstance(value, type):
        return stated
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, (int, float, bool, complex)):
        return sys.getsizeof(value)
    inner = _depth + 1
    if isinstance(value, dict):
        return sum(size_of(k, inner, seen) + size_of(v, inner, seen) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(size_of(item, inner, seen) for item in value)
    if dataclasses.is_dataclass(value):
        return sum(size_of(getattr(value, f.name), inner, seen) for f in dataclasses.fields(value))
    held = getattr(value, "__dict__", None)
    if isinstance(held, dict):
        return size_of(held, inner, seen)
    return 0


def _is_tensor(value: Any) -> bool:
    return callable(getattr(value, "untyped_storage", None)) and hasattr(value, "numel")


def _held_bytes(array: Any, seen: set[int]) -> int:
    """Bytes an array or tensor keeps alive: the whole buffer it views, not its own extent.

    A small NumPy view of a large array (or of a torch tensor's storage) holds every byte of
    that buffer until the view goes, so a result is counted by the buffers at the end of its
    views' ``base`` chains, each buffer once.
    """
    root = array
    while isinstance(root, np.ndarray) and root.base is not None:
        root = root.base
    if id(root) in seen and root is not array:
        return 0
    seen.add(id(root))
    if _is_tensor(root):
        return int(root.untyped_storage().nbytes())
    if isinstance(root, np.ndarray):
        return int(root.nbytes)
    stated = getattr(root, "nbytes", None)  # a memoryview, an mmap's buffer
    if isinstance(stated, int):
        return stated
    try:
        return len(root)
    except TypeError:
        return int(array.nbytes)


class ResultStore:
    """Least-recently-used map of finished results; thread-safe.

    Holds at most ``max_entries`` results and, when ``max_bytes`` is set, at most that many bytes
    (by :func:`size_of`). Eviction takes the least recently used entry that no live session has
    pinned; only when every remaining entry is pinned does it take pinned ones, from the visitor
    whose pins hold the most bytes first. The newest entry always stays.
    """

    def __init__(
        self,
        max_entries: int = 16,
        max_bytes: int | None = None,
        alive: Callable[[str], bool] = lambda _sid: True,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.alive = alive
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._used: dict[Hashable, float] = {}
        self._sizes: dict[Hashable, int] = {}
        self._pins: dict[str, list[Hashable]] = {}
        self._visitors: dict[str, str] = {}
        self._computing: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(self._sizes.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._used.clear()
            self._sizes.clear()

    def pin(self, key: Hashable, session: str, visitor: str = "") -> None:
        """Mark ``key`` as shown by ``session`` (its most recent pins are kept), a tab of
        ``visitor`` (the client; the session alone when not given)."""
        if not session:
            return
        with self._lock:
            self._visitors[session] = visitor or session
            pins = self._pins.setdefault(session, [])
            if key in pins:
                pins.remove(key)
            pins.append(key)
            del pins[:-PINS_PER_SESSION]

    def _pinned(self) -> set[Hashable]:
        dead = [sid for sid in self._pins if not self.alive(sid)]
        for sid in dead:
            del self._pins[sid]
            self._visitors.pop(sid, None)
        return {key for pins in self._pins.values() for key in pins}

    def _pinned_by_visitor(self) -> dict[str, set[Hashable]]:
        by: dict[str, set[Hashable]] = {}
        for sid, pins in self._pins.items():
            by.setdefault(self._visitors.get(sid, sid), set()).update(pins)
        return by

    def _drop_from_largest_visitor(self, keep: Hashable) -> bool:
        """Drop the least recently used pinned entry of the visitor whose pins hold the most
        bytes (never ``keep``); False when there is none to drop."""
        held = {
            visitor: [k for k in self._items if k in keys and k != keep]
            for visitor, keys in self._pinned_by_visitor().items()
        }
        held = {visitor: keys for visitor, keys in held.items() if keys}
        if not held:
            return False
        largest = max(held, key=lambda v: sum(self._sizes.get(k, 0) for k in held[v]))
        self._drop(held[largest][0])
        return True

    def evict_idle(self, idle_s: float, now: float | None = None) -> int:
        """Drop every unpinned entry nobody asked for in the last ``idle_s`` seconds."""
        now = time.monotonic() if now is None else now
        with self._lock:
            pinned = self._pinned()
            old = [
                k for k in self._items if k not in pinned and now - self._used.get(k, now) > idle_s
            ]
            for key in old:
                self._drop(key)
            return len(old)

    @overload
    def get(self, key: JobKey[R]) -> R | None: ...

    @overload
    def get(self, key: Hashable) -> object | None: ...

    def get(self, key: Hashable) -> object | None:
        """The value stored under ``key`` (its key type says what it is), or None."""
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            self._used[key] = time.monotonic()
            value: object = self._items[key]
            return value

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            self._used[key] = time.monotonic()
            self._sizes[key] = size_of(value)
            self._shrink(keep=key)

    def _over(self) -> bool:
        return len(self._items) > self.max_entries or (
            self.max_bytes is not None and sum(self._sizes.values()) > self.max_bytes
        )

    def _shrink(self, keep: Hashable) -> None:
        if not self._over():
            return
        pinned = self._pinned()
        for key in list(self._items):
            if not self._over():
                return
            if key != keep and key not in pinned:
                self._drop(key)
        while self._over() and self._drop_from_largest_visitor(keep):
            pass

    def _drop(self, key: Hashable) -> None:
        del self._items[key]
        self._used.pop(key, None)
        self._sizes.pop(key, None)

    @overload
    def get_or_compute(self, key: JobKey[R], compute: Callable[[], R]) -> R: ...

    @overload
    def get_or_compute(self, key: Hashable, compute: Callable[[], object]) -> object: ...

    def get_or_compute(self, key: Hashable, compute: Callable[[], object]) -> object:
        """The stored value for ``key``, or ``compute()`` stored once it returns.

        Two callers asking for the same key compute it once. If ``compute`` raises, nothing is
        stored and the exception propagates.
        """
        found: object | None = self.get(key)
        if found is not None:
            return found
        with self._lock:
            computing = self._computing.setdefault(key, threading.Lock())
        try:
            with computing:
                found = self.get(key)
                if found is not None:
                    return found
                value = compute()
                self.put(key, value)
                return value
        finally:
            with self._lock:
                self._computing.pop(key, None)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
