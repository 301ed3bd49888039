"""A folder under a byte budget: what it holds, least-recently-used eviction, and a free-disk check
before anything is written.

Files the app writes for visitors (pruned checkpoints and their zips, converted GGUF files, stored
prompts) would otherwise fill the disk a few clicks at a time. Each top-level entry of the folder
(a file or a directory) is one item; its last use is its modification time, which :func:`touch`
renews whenever the item is served again. :func:`make_room` removes the least recently used
items until the new one fits the budget, then checks that the disk itself has the space, and
refuses with a :class:`DiskSpaceError` otherwise. The folder and the budget are arguments: this
module reads no settings. Messages never name a path, so they can be shown to a visitor.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from models.errors import UserError

_LOCK = threading.Lock()  # one eviction at a time in this process


class DiskSpaceError(UserError):
    """There is no room on disk for what was asked; the message says how much is needed."""


@dataclass(frozen=True)
class Entry:
    """One item of a budgeted folder: its path, its size in bytes and its last use (mtime)."""

    path: Path
    size: int
    used: float


def human_bytes(n: float) -> str:
    """``1.2 GB``, ``340 MB``, ``12 kB`` (decimal units, as disks are sold)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def entry_size(path: Path) -> int:
    """Bytes of a file, or of every file under a directory; symbolic links are not followed."""
    info = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path):
        return info.st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # removed while we walked
                continue
    return total


def entries(folder: Path) -> list[Entry]:
    """The folder's top-level items, least recently used first (none if it does not exist)."""
    found = []
    try:
        children = list(Path(folder).iterdir())
    except FileNotFoundError:
        return []
    for child in children:
        try:
            found.append(Entry(child, entry_size(child), os.lstat(child).st_mtime))
        except FileNotFoundError:
            continue
    return sorted(found, key=lambda e: (e.used, e.path.name))


def touch(path: Path) -> None:
    """Mark an item as just used, so that it is evicted last."""
    now = time.time()
    os.utime(path, (now, now), follow_symlinks=False)


def free_bytes(folder: Path) -> int:
    """Free bytes on the disk that holds ``folder`` (or its nearest existing parent)."""
    where = Path(folder).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    return shutil.disk_usage(where).free


def remove(path: Path) -> None:
    """Delete an item, file or directory (a missing one is not an error)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        Path(path).unlink(missing_ok=True)


def make_room(
    folder: Path, budget: int | None, needed: int, keep: Iterable[Path] = (), headroom: int = 0
) -> list[Path]:
    """Make ``needed`` bytes fit under ``folder`` before writing them.

    Removes the least recently used items (never those in ``keep``) until the folder's
    contents plus ``needed`` fit in ``budget``, then checks that the disk has ``needed +
    headroom`` bytes free.

    Args:
        folder: the budgeted folder (created if missing).
        budget: the most bytes the folder may hold; None for no budget (nothing is evicted,
            the free-disk check still runs).
        needed: bytes about to be written.
        keep: items that must stay (what is about to be written or served).
        headroom: bytes the disk must keep free beyond ``needed``.

    Returns:
        The items removed.

    Raises:
        DiskSpaceError: ``needed`` alone exceeds the budget, or the disk is too full.
    """
    if budget is not None and needed > budget:
        raise DiskSpaceError(
            f"This needs {human_bytes(needed)} of disk space, more than the "
            f"{human_bytes(budget)} this server keeps for such files."
        )
    Path(folder).mkdir(parents=True, exist_ok=True)
    kept = {Path(p).absolute() for p in keep}
    removed: list[Path] = []
    with _LOCK:
        if budget is not None:
            items = entries(folder)
            used = sum(e.size for e in items)
            for entry in items:
                if used + needed <= budget:
                    break
                if entry.path.absolute() in kept:
                    continue
                remove(entry.path)
                removed.append(entry.path)
                used -= entry.size
            if used + needed > budget:
                raise DiskSpaceError(
                    f"This needs {human_bytes(needed)} of disk space, and files in use take "
                    f"{human_bytes(used)} of the {human_bytes(budget)} this server keeps for "
                    "such files. Try again when they are no longer in use."
                )
        free = free_bytes(folder)
    if free < needed + headroom:
        raise DiskSpaceError(
            f"Not enough disk space: this needs {human_bytes(needed + headroom)}"
            f" and {human_bytes(free)} is free."
        )
    return removed
