"""A bounded, thread-safe store for results of long, interruptible work (and loaded models).

Work files its result here only once it has finished: an interrupted run leaves nothing behind,
so partial work is never served as complete. Keys must hold everything that changes the result.
The store is bounded by a count, optionally by bytes, and can drop what nobody used for a while.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


def size_of(value: Any) -> int:
    """Bytes a result holds, as far as it says (``nbytes``); 0 for small plain values."""
    return int(getattr(value, "nbytes", 0) or 0)


class ResultStore:
    """Least-recently-used map of finished results; thread-safe.

    Holds at most ``max_entries`` results and, when ``max_bytes`` is set, at most that many bytes
    (by :func:`size_of`): the oldest go first, but the newest result always stays.
    """

    def __init__(self, max_entries: int = 16, max_bytes: int | None = None) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._used: dict[Hashable, float] = {}
        self._computing: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(size_of(v) for v in self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._used.clear()

    def evict_idle(self, idle_s: float, now: float | None = None) -> int:
        """Drop every entry nobody asked for in the last ``idle_s`` seconds; return how many."""
        now = time.monotonic() if now is None else now
        with self._lock:
            old = [k for k in self._items if now - self._used.get(k, now) > idle_s]
            for key in old:
                del self._items[key]
                self._used.pop(key, None)
            return len(old)

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            self._used[key] = time.monotonic()
            return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            self._used[key] = time.monotonic()
            while len(self._items) > self.max_entries or (
                    self.max_bytes is not None and len(self._items) > 1
                    and sum(size_of(v) for v in self._items.values()) > self.max_bytes):
                oldest, _ = self._items.popitem(last=False)
                self._used.pop(oldest, None)

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The stored value for ``key``, or ``compute()`` stored once it returns.

        If ``compute`` raises (Streamlit stopping the script for a rerun, a failure), nothing
        is stored and the exception propagates.
        """
        found = self.get(key)
        if found is not None:
            return found
        with self._lock:
            computing = self._computing.setdefault(key, threading.Lock())
        with computing:  # two callers asking for the same key compute it once
            found = self.get(key)
            if found is not None:
                return found
            value = compute()
            self.put(key, value)
        with self._lock:
            self._computing.pop(key, None)
        return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
