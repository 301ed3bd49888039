"""A small bounded store for results of long, interruptible work.

The page runs the ablation loop itself (so it can draw a progress bar) and files the result here
only once the loop has finished: an interrupted run leaves nothing behind, so partial work is
never served as complete. Keys must hold everything that changes the result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable


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
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(size_of(v) for v in self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries or (
                    self.max_bytes is not None and len(self._items) > 1
                    and sum(size_of(v) for v in self._items.values()) > self.max_bytes):
                self._items.popitem(last=False)

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The stored value for ``key``, or ``compute()`` stored once it returns.

        If ``compute`` raises (Streamlit stopping the script for a rerun, a failure), nothing
        is stored and the exception propagates.
        """
        found = self.get(key)
        if found is not None:
            return found
        value = compute()
        self.put(key, value)
        return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
