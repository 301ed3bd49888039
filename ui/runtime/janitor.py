"""The janitor: drops models and results nobody used lately and hands their memory back.

One daemon thread, started once by :func:`ui.runtime.server.start` (never on import). No
Streamlit here.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import threading
import time
from collections.abc import Callable

from ui.runtime.store import ResultStore


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the operating system (glibc)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class Janitor:
    """Drops entries nobody used for ``idle_s`` seconds, then frees their memory.

    Wakes every ``idle_s / 4`` seconds (at most 30). Memory is also collected once per
    ``idle_s`` while no job runs: a closed browser session lets go of what it held minutes after
    the store dropped its own reference, and an idle server allocates too little for Python's
    collector to notice the cycles left behind.
    """

    def __init__(
        self,
        stores: list[ResultStore],
        idle_s: float = 600.0,
        busy: Callable[[], bool] = lambda: False,
        extra: Callable[[], None] = lambda: None,
    ) -> None:
        self.stores, self.idle_s, self.busy, self.extra = stores, idle_s, busy, extra
        self._collected = time.monotonic()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def sweep(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        dropped = sum(store.evict_idle(self.idle_s, now) for store in self.stores)
        self.extra()
        if dropped or (now - self._collected >= self.idle_s and not self.busy()):
            release_memory()
            self._collected = now
        return dropped

    def start(self) -> None:
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(min(30.0, max(1.0, self.idle_s / 4))):
                self.sweep()

        self._thread = threading.Thread(target=loop, name="atlas-janitor", daemon=True)
        self._thread.start()
        # A daemon thread still collecting garbage while the interpreter shuts down can free
        # torch tensors after torch's own teardown, which aborts the process: end it first.
        atexit.register(self.stop)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop sweeping and wait (up to ``timeout_s``) for a sweep under way to end."""
        atexit.unregister(self.stop)  # a stopped janitor (and the stores it holds) can go
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
