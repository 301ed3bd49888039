"""A folder under a byte budget: sizes, least-recently-used eviction by mtime, the free-disk
check, and messages that name no path."""

import os
from collections import namedtuple

import pytest

from models import disk_budget
from models.disk_budget import (
    DiskSpaceError,
    entries,
    entry_size,
    human_bytes,
    make_room,
    touch,
)


def item(folder, name: str, size: int, used: float):
    """A file (or a directory with one file) of ``size`` bytes last used at ``used``."""
    path = folder / name
    if name.endswith("/"):
        path = folder / name.rstrip("/")
        path.mkdir()
        (path / "weights.bin").write_bytes(b"x" * size)
    else:
        path.write_bytes(b"x" * size)
    os.utime(path, (used, used))
    return path


def test_sizes_count_files_under_directories_without_following_links(tmp_path):
    folder = item(tmp_path, "ckpt/", 300, 10)
    (folder / "sub").mkdir()
    (folder / "sub" / "more.txt").write_bytes(b"y" * 50)
    outside = item(tmp_path, "big.bin", 10_000, 10)
    (folder / "link").symlink_to(outside)
    assert entry_size(folder) == 350 + len(str(outside))  # the link itself, not its target
    assert entries(tmp_path / "missing") == []


def test_least_recently_used_go_first_until_the_new_item_fits(tmp_path):
    oldest = item(tmp_path, "a/", 400, 100)
    middle = item(tmp_path, "b.zip", 400, 200)
    newest = item(tmp_path, "c/", 400, 300)
    assert [e.path.name for e in entries(tmp_path)] == ["a", "b.zip", "c"]
    removed = make_room(tmp_path, budget=1000, needed=500)
    assert removed == [oldest, middle] and not oldest.exists() and not middle.exists()
    assert newest.exists()


def test_kept_and_recently_touched_items_stay(tmp_path):
    serving = item(tmp_path, "a/", 400, 100)
    old = item(tmp_path, "b/", 400, 200)
    fresh = item(tmp_path, "c/", 400, 300)
    touch(fresh)
    assert make_room(tmp_path, budget=1000, needed=200, keep=[serving]) == [old]
    assert serving.exists() and fresh.exists()


def test_what_cannot_fit_is_refused_with_sizes_and_no_path(tmp_path):
    item(tmp_path, "a/", 400, 100)
    with pytest.raises(DiskSpaceError) as err:
        make_room(tmp_path, budget=1000, needed=1500)
    assert "1.5 kB" in str(err.value) and "1.0 kB" in str(err.value)
    assert str(tmp_path) not in str(err.value)
    assert (tmp_path / "a").exists()  # nothing removed for a request that can never fit
    busy = item(tmp_path, "b/", 400, 200)
    with pytest.raises(DiskSpaceError, match="in use"):
        make_room(tmp_path, budget=1000, needed=500, keep=[tmp_path / "a", busy])


def test_a_full_disk_is_refused_before_writing(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(disk_budget.shutil, "disk_usage", lambda _p: usage(10**12, 0, 2 * 10**9))
    with pytest.raises(DiskSpaceError, match=r"needs 3\.0 GB and 2\.0 GB is free") as err:
        make_room(tmp_path / "new", budget=None, needed=3 * 10**9)
    assert str(tmp_path) not in str(err.value)
    assert make_room(tmp_path / "new", budget=None, needed=10**9) == []
    assert (tmp_path / "new").is_dir()


def test_human_bytes():
    assert [human_bytes(n) for n in (12, 1_200, 340_000_000, 1.2e9)] == [
        "12 bytes",
        "1.2 kB",
        "340.0 MB",
        "1.2 GB",
    ]
