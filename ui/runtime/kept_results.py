"""Finished results that took a while, kept on disk so a restart does not recompute them.

Corpus scores take half a minute on SmolLM2, importance minutes; a server restart used to lose
them all. A result whose key type says ``persist = True`` and whose job ran longer than
:data:`KEEP_AFTER_S` is written to the app's cache folder (``results/``) under the SHA-256 of
its key, and read back when the same key is asked for again. The folder is bounded in bytes
(oldest first, :mod:`models.disk_budget`). Only the server writes these files, into its own
cache folder, so reading them back trusts nothing a visitor sent. No Streamlit here.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import threading
from pathlib import Path
from typing import Any

from models.disk_budget import DiskSpaceError, make_room, touch

KEEP_AFTER_S = 5.0
FORMAT = "1"  # bump when a kept type changes shape: old files are then never read
log = logging.getLogger(__name__)


def key_name(key: Any) -> str:
    """A file name for ``key``: the SHA-256 of its type and its fields."""
    text = f"{FORMAT}|{type(key).__module__}.{type(key).__qualname__}|{key!r}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32] + ".pkl"


class KeptResults:
    """Results kept in ``folder`` under ``budget`` bytes."""

    def __init__(self, folder: Path, budget: int) -> None:
        self.folder, self.budget = folder, budget
        self._lock = threading.Lock()

    @staticmethod
    def wanted(key: Any, seconds: float) -> bool:
        return bool(getattr(key, "persist", False)) and seconds >= KEEP_AFTER_S

    def save(self, key: Any, value: Any) -> None:
        """Keep ``value`` for ``key`` (best effort: a full disk only logs)."""
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        path = self.folder / key_name(key)
        with self._lock:
            try:
                make_room(self.folder, self.budget, len(data), keep=[path])
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, path)
            except (OSError, DiskSpaceError) as err:
                log.warning("could not keep a result on disk: %s", err)

    def load(self, key: Any) -> Any | None:
        """The kept value for ``key``, or None."""
        if not getattr(key, "persist", False):
            return None
        path = self.folder / key_name(key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            value = pickle.loads(data)
        except Exception as err:  # noqa: BLE001 - a stale or broken file is simply not used
            log.warning("ignored a kept result that does not read back: %s", err)
            path.unlink(missing_ok=True)
            return None
        touch(path)
        return value
