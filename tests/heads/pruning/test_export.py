"""The pruned export beside the app's own loads (the one load lock), under a disk budget, and
without a server path in anything a visitor reads."""

import json
import os
import threading
import zipfile
from dataclasses import replace

import pytest

from models.disk_budget import DiskSpaceError
from models.heads.pruning.export import (
    checkpoint_bytes,
    export_estimate,
    export_name,
    prune_and_export,
    zip_directory,
)
from models.heads.pruning.loss import corpus_tasks
from models.model.loading import load
from models.model.spec import ModelSpec

TEXTS = ("def double(x):\n    return 2 * x\n",)
HEADS = [(0, 1), (2, 3)]


@pytest.fixture(scope="module")
def tasks(bundled):
    return corpus_tasks(bundled, TEXTS)


@pytest.mark.slow
def test_export_beside_concurrent_loads(bundled, tasks, tmp_path):
    """Before the export took the load lock, its ``from_pretrained`` beside these loads failed
    with "Cannot copy out of meta tensor"."""
    errors: list[str] = []
    loads = {"bundled": 0, "minilm": 0}
    done = threading.Event()

    def keep_loading(name: str) -> None:
        while not done.is_set() or loads[name] == 0:
            try:
                load(ModelSpec(name))
                loads[name] += 1
            except Exception as err:  # noqa: BLE001 - every failure is reported below
                errors.append(f"load {name}: {type(err).__name__}: {err}")
                return

    threads = [threading.Thread(target=keep_loading, args=(name,)) for name in loads]
    for thread in threads:
        thread.start()
    try:
        for i in range(2):
            prune_and_export(
                bundled.spec, HEADS, tmp_path, tasks, budget_bytes=None, name=f"pruned-{i}"
            )
    except Exception as err:  # noqa: BLE001
        errors.append(f"export: {type(err).__name__}: {err}")
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=300)
    assert errors == [] and all(loads.values()), (errors, loads)
    later = load(ModelSpec("bundled"))
    assert later.facts == bundled.facts


@pytest.fixture(scope="module")
def exported(bundled, tasks, tmp_path_factory):
    root = tmp_path_factory.mktemp("exports")
    report = prune_and_export(bundled.spec, HEADS, root, tasks, budget_bytes=None)
    return root, report


def test_nothing_a_visitor_reads_names_the_folder(exported):
    root, report = exported
    directory = root / export_name(ModelSpec("bundled"), HEADS)
    assert report.directory == str(directory) and report.name == directory.name
    text = "\n".join(report.lines())
    assert str(root) not in text and "/tmp" not in text
    info = json.loads((directory / "pruning.json").read_text())
    assert str(root) not in json.dumps(info) and "directory" not in info["report"]


def test_old_exports_make_room_and_new_ones_are_refused_without_it(bundled, tasks, tmp_path):
    old = tmp_path / "old-export"
    old.mkdir()
    (old / "model.safetensors").write_bytes(b"\0" * 1000)
    os.utime(old, (1, 1))  # used long ago
    needed = checkpoint_bytes(873_600, "float32")  # the bundled model's parameters
    again = prune_and_export(
        bundled.spec, [(1, 0)], tmp_path, tasks, budget_bytes=needed + 500, name="new-export"
    )
    assert not old.exists() and (tmp_path / "new-export" / "config.json").is_file()
    assert again.plan.heads == ((1, 0),)
    with pytest.raises(DiskSpaceError, match="more than the") as err:
        prune_and_export(bundled.spec, HEADS, tmp_path, tasks, budget_bytes=needed // 2)
    assert str(tmp_path) not in str(err.value)


def test_zip_is_served_again_and_counts_against_the_budget(exported):
    root, report = exported
    directory = root / report.name
    archive = zip_directory(directory, budget_bytes=None)
    assert f"{report.name}/config.json" in zipfile.ZipFile(archive).namelist()
    written = archive.stat().st_ino
    assert zip_directory(directory, budget_bytes=None) == archive
    assert archive.stat().st_ino == written  # served again, not rewritten
    archive.unlink()
    with pytest.raises(DiskSpaceError, match="more than the"):
        zip_directory(directory, budget_bytes=1000)
    assert not archive.exists()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_disk_estimate_is_of_the_dtype_written(bundled, tasks, tmp_path, dtype):
    """The export button's "about N MB on disk" (the checkpoint and its zip) against the bytes
    really written, for each dtype the page offers."""
    spec = replace(bundled.spec, dtype=dtype)
    report = prune_and_export(spec, HEADS, tmp_path, tasks, budget_bytes=None)
    directory = tmp_path / report.name
    checkpoint = sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())
    written = checkpoint + zip_directory(directory, budget_bytes=None).stat().st_size
    _, estimate = export_estimate(bundled, tasks, dtype)
    assert 0.5 <= estimate / written <= 2.0, (estimate, written)
