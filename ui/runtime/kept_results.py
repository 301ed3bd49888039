"""Finished results that took a while, kept on disk so a restart does not recompute them.

Corpus scores take half a minute on SmolLM2, importance minutes; a server restart used to lose
them all. A result whose key type says ``persist = True`` and whose job ran longer than
:data:`KEEP_AFTER_S` is written to the app's cache folder (``results/``) and read back when the
same key is asked for again. The folder is bounded in bytes (oldest first,
:mod:`models.disk_budget`).

A kept file holds data only, never code: a NumPy ``.npz`` archive (stored, not compressed) of
plain-number arrays and one JSON tree (:mod:`ui.runtime.result_codec`), read with
``allow_pickle=False`` and rebuilt from the type the key declares. Its name is the SHA-256 of the
key and then of its own bytes; a file whose bytes do not hash to its name, whose archive members
are compressed or larger than the file, or whose tree does not match the key's result type is
removed unread. So a file planted in the folder (by another local user, a shared volume, a
restored backup) can at worst make the app recompute. No Streamlit here.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import threading
import zipfile
from collections.abc import Hashable
from pathlib import Path
from typing import Any, TypeVar, overload

import numpy as np

from models.disk_budget import DiskSpaceError, make_room, touch
from ui.runtime.result_codec import UnreadableResult, decode, encode, result_type
from ui.runtime.store import JobKey

R = TypeVar("R")

KEEP_AFTER_S = 5.0
FORMAT = "3"  # bump when a kept type changes shape: old files are then never read
TREE = "tree"
log = logging.getLogger(__name__)


def key_name(key: Any) -> str:
    """The start of ``key``'s file name: the SHA-256 of its type and its fields."""
    text = f"{FORMAT}|{type(key).__module__}.{type(key).__qualname__}|{key!r}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def content_name(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def to_bytes(value: Any) -> bytes:
    """``value`` as an ``.npz`` archive: its JSON tree and its arrays.

    Raises:
        UnreadableResult: ``value`` is not plain data.
    """
    tree, arrays = encode(value)
    text = json.dumps(tree, allow_nan=True).encode("utf-8")
    members = {TREE: np.frombuffer(text, dtype=np.uint8)}
    members.update({f"a{i}": array for i, array in enumerate(arrays)})
    out = io.BytesIO()
    np.savez(out, allow_pickle=False, **members)
    return out.getvalue()


def from_bytes(data: bytes, kind: object) -> object:
    """The value of type ``kind`` that :func:`to_bytes` wrote.

    Raises:
        UnreadableResult: not such an archive, or not a value of ``kind``.
    """
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED or info.file_size > len(data):
                raise UnreadableResult("an archive member is compressed or larger than the file")
    with np.load(io.BytesIO(data), allow_pickle=False) as found:
        names = set(found.files)
        if f"{TREE}.npy" not in {f + ".npy" for f in names}:
            raise UnreadableResult("no tree")
        tree = json.loads(found[TREE].tobytes().decode("utf-8"))
        arrays = [found[f"a{i}"] for i in range(len(names) - 1)]
    return decode(tree, kind, arrays)


class KeptResults:
    """Results kept in ``folder`` under ``budget`` bytes."""

    def __init__(self, folder: Path, budget: int) -> None:
        self.folder, self.budget = folder, budget
        self._lock = threading.Lock()

    @staticmethod
    def wanted(key: Any, seconds: float) -> bool:
        return bool(getattr(key, "persist", False)) and seconds >= KEEP_AFTER_S

    def _files(self, key: Any) -> list[Path]:
        return sorted(self.folder.glob(f"{key_name(key)}.*.npz"))

    def save(self, key: Any, value: Any) -> None:
        """Keep ``value`` for ``key`` (best effort: a full disk or a value that is not plain data
        only logs)."""
        try:
            data = to_bytes(value)
        except UnreadableResult as err:
            log.warning("a %s result is not kept: %s", type(key).__name__, err)
            return
        path = self.folder / f"{key_name(key)}.{content_name(data)}.npz"
        with self._lock:
            try:
                make_room(self.folder, self.budget, len(data), keep=[path])
                for old in self._files(key):
                    old.unlink(missing_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, path)
            except (OSError, DiskSpaceError) as err:
                log.warning("could not keep a result on disk: %s", err)

    @overload
    def load(self, key: JobKey[R]) -> R | None: ...

    @overload
    def load(self, key: Hashable) -> object | None: ...

    def load(self, key: Hashable) -> object | None:
        """The kept value for ``key``, of the type its key class declares (each file is decoded
        as that type and refused otherwise), or None (a file that fails a check is removed)."""
        if not getattr(key, "persist", False):
            return None
        for path in self._files(key):
            value = self._read(path, key)
            if value is not None:
                touch(path)
                return value
        return None

    def _read(self, path: Path, key: Hashable) -> object | None:
        try:
            if path.stat().st_size > self.budget:
                raise UnreadableResult("larger than the folder's budget")
            data = path.read_bytes()
            if path.name.split(".")[1] != content_name(data):
                raise UnreadableResult("its bytes do not match its name's hash")
            return from_bytes(data, result_type(type(key)))
        except OSError:
            return None
        except Exception as err:  # noqa: BLE001 - a stale, broken or planted file is not used
            log.warning("removed a kept result that does not read back: %s", err)
            path.unlink(missing_ok=True)
            return None
