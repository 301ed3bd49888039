"""Finished results that took a while survive a restart, read back from the app's cache."""

from dataclasses import dataclass

import numpy as np

from ui.runtime import kept_results
from ui.runtime.jobs import JobKey, JobPool
from ui.runtime.kept_results import KeptResults, key_name
from ui.runtime.settings import Settings


@dataclass(frozen=True)
class SlowScores(JobKey):
    persist = True
    corpus: str


@dataclass(frozen=True)
class Quick(JobKey):
    text: str


def test_a_slow_result_is_read_back_after_a_restart(tmp_path, monkeypatch):
    monkeypatch.setattr(kept_results, "KEEP_AFTER_S", 0.0)
    value = {"scores": np.arange(6.0).reshape(2, 3)}
    first = JobPool(Settings(), kept=KeptResults(tmp_path, 10**6))
    first.submit(SlowScores("english"), "scores", lambda p: value).future.result(10)
    first.submit(Quick("x"), "quick", lambda p: "not kept").future.result(10)
    restarted = JobPool(Settings(), kept=KeptResults(tmp_path, 10**6))
    found = restarted.finished(SlowScores("english"))
    np.testing.assert_array_equal(found["scores"], value["scores"])
    assert restarted.finished(Quick("x")) is None
    assert restarted.finished(SlowScores("other corpus")) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [key_name(SlowScores("english"))]


def test_a_broken_file_is_ignored_and_removed(tmp_path):
    kept = KeptResults(tmp_path, 10**6)
    path = tmp_path / key_name(SlowScores("english"))
    path.write_bytes(b"not a pickle")
    assert kept.load(SlowScores("english")) is None and not path.exists()


def test_the_folder_stays_under_its_budget(tmp_path):
    kept = KeptResults(tmp_path, 3000)
    for i in range(5):
        kept.save(SlowScores(str(i)), b"x" * 1000)
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert total <= 3000 and kept.load(SlowScores("4")) == b"x" * 1000
