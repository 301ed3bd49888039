"""Finished results that took a while survive a restart, read back from the app's cache as
arrays and JSON: a file planted in the folder can at worst make the app recompute."""

from __future__ import annotations

import io
import pickle
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

from models.circuits.findings import AtPFindings, WeightFindings
from models.generate.sweep import EvictionPoint, EvictionResult
from models.head import Head
from models.heads.finding.corpus_scores import CorpusScores, TopExamples
from models.heads.finding.spread import Spread
from models.heads.pruning.importance import CorpusImportance
from ui.runtime import kept_results
from ui.runtime.job_keys import EvictionKey, ImportanceKey
from ui.runtime.jobs import JobKey, JobPool
from ui.runtime.kept_results import KeptResults, content_name, from_bytes, key_name, to_bytes
from ui.runtime.result_codec import UnreadableResult, result_type
from ui.runtime.settings import Settings


@dataclass(frozen=True)
class SlowScores(JobKey[dict[str, np.ndarray]]):
    persist = True
    corpus: str


@dataclass(frozen=True)
class SlowBytes(JobKey[bytes]):
    persist = True
    name: str


@dataclass(frozen=True)
class Quick(JobKey[str]):
    text: str


def kept_files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


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
    (name,) = kept_files(tmp_path)
    assert name.startswith(key_name(SlowScores("english")) + ".") and name.endswith(".npz")


def spread(seed: int) -> Spread:
    return Spread(np.random.default_rng(seed).random((4, 3, 2)))


def test_every_kept_kind_of_result_reads_back_as_it_was():
    """Results with nested dataclasses, dicts keyed by Literals and tuples, named tuples,
    optional arrays and tensors come back equal, with their types."""
    scores = CorpusScores(
        spreads={"induction": spread(0), "previous_token": spread(1)},
        examples={
            "induction": TopExamples(
                np.ones((3, 2, 5)),
                np.zeros((3, 2, 5), np.int64),
                np.ones((3, 2, 5), np.int64),
                np.ones((3, 2, 5), np.int64),
            )
        },
        tokens=(("a", "b"), ("c",)),
        n_cut=2,
        top_sink_pos=np.arange(24).reshape(4, 3, 2),
    )
    back = from_bytes(to_bytes(scores), CorpusScores)
    assert isinstance(back.spreads["induction"], Spread) and back.tokens == (("a", "b"), ("c",))
    np.testing.assert_array_equal(back.spreads["previous_token"].per_text, spread(1).per_text)
    np.testing.assert_array_equal(back.top_sink_pos, scores.top_sink_pos)
    importance = CorpusImportance(
        spreads={"zero": spread(2)},
        base_losses=np.array([1.5, 2.5]),
        means=torch.arange(6.0).reshape(2, 3),
        kind="causal",
        n_targets=7,
    )
    back = from_bytes(to_bytes(importance), result_type(ImportanceKey))
    assert isinstance(back.means, torch.Tensor) and torch.equal(back.means, importance.means)
    result = EvictionResult(
        n_tokens=10,
        full_perplexity=3.25,
        points=(EvictionPoint("window", 4, 5.5), EvictionPoint("sinks", 4, 4.0)),
        sinks=4,
        positions="original",
        losses={("window", 4): np.arange(3.0), ("full", 10): np.ones(3)},
    )
    back, seconds = from_bytes(to_bytes((result, 12.5)), result_type(EvictionKey))
    assert seconds == 12.5 and back.points == result.points
    np.testing.assert_array_equal(back.losses["window", 4], np.arange(3.0))
    assert from_bytes(to_bytes(Head(3, 1)), Head) == Head(3, 1)


def test_each_persisted_key_declares_a_result_type_the_reader_can_build():
    """Every ``persist = True`` key names its result type; the reader can follow it."""
    from ui.runtime import job_keys

    for kind in vars(job_keys).values():
        if isinstance(kind, type) and issubclass(kind, JobKey) and kind.persist:
            assert result_type(kind) is not Any, kind
    assert result_type(job_keys.AttributionKey) is AtPFindings
    assert result_type(job_keys.WeightsKey) is WeightFindings


class WritesAFile:
    """Unpickling this runs ``open(path, "w")``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def planted(folder, key, data: bytes, name: str | None = None):
    path = folder / f"{key_name(key)}.{name or content_name(data)}.npz"
    path.write_bytes(data)
    return path


def test_a_planted_pickle_runs_nothing_and_is_removed(tmp_path):
    marker = tmp_path / "code-ran.txt"
    folder = tmp_path / "results"
    folder.mkdir()
    key = SlowScores("english")
    payload = pickle.dumps({"scores": WritesAFile(str(marker))})
    files = [planted(folder, key, payload)]
    # the same payload as an object array inside a well-formed archive
    inside = io.BytesIO()
    np.savez(
        inside,
        tree=np.frombuffer(b'{"$dict": []}', np.uint8),
        a0=np.array([WritesAFile(str(marker))], dtype=object),
    )
    files.append(planted(folder, key, inside.getvalue()))
    # and the old format's name
    (folder / (key_name(key) + ".pkl")).write_bytes(payload)
    kept = KeptResults(folder, 10**6)
    assert kept.load(key) is None
    assert not marker.exists()
    assert not any(p.exists() for p in files)


def test_a_file_whose_bytes_do_not_match_its_name_is_not_read(tmp_path):
    key = SlowScores("english")
    good = to_bytes({"scores": np.ones(3)})
    path = planted(tmp_path, key, good, name="0" * 32)
    assert KeptResults(tmp_path, 10**6).load(key) is None and not path.exists()


def test_a_file_of_the_wrong_shape_for_its_type_is_not_used(tmp_path):
    """A well-formed archive whose tree is not the key's result type: refused, removed."""
    key = SlowScores("english")
    path = planted(tmp_path, key, to_bytes(["not", "a", "dict"]))
    assert KeptResults(tmp_path, 10**6).load(key) is None and not path.exists()
    with pytest.raises(UnreadableResult):
        from_bytes(to_bytes({"n_tokens": 3}), EvictionResult)


def test_a_compressed_archive_is_refused_before_it_is_unpacked(tmp_path):
    """A small deflated member declaring a huge array is never inflated."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("tree.npy", b"\0" * 10_000_000)
    data = out.getvalue()
    assert len(data) < 100_000
    key = SlowScores("english")
    path = planted(tmp_path, key, data)
    assert KeptResults(tmp_path, 10**6).load(key) is None and not path.exists()


def test_a_value_that_is_not_plain_data_is_not_kept(tmp_path):
    kept = KeptResults(tmp_path, 10**6)
    kept.save(SlowScores("x"), {"f": lambda: None})  # type: ignore[dict-item]
    assert kept_files(tmp_path) == []


def test_the_folder_stays_under_its_budget(tmp_path):
    kept = KeptResults(tmp_path, 4000)
    for i in range(5):
        kept.save(SlowBytes(str(i)), b"x" * 1000)
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert total <= 4000 and kept.load(SlowBytes("4")) == b"x" * 1000
    assert kept.load(SlowBytes("0")) is None


def test_real_results_of_the_bundled_model_read_back_equal(bundled):
    """The weights job's and the head finder's results, computed, written and read back."""
    from models.circuits.findings import weight_findings
    from models.heads.finding.induction import RepeatedScores, measure_repeated
    from models.progress import quiet

    found = weight_findings(bundled, quiet)
    back = from_bytes(to_bytes(found), WeightFindings)
    assert back.scores.basis == found.scores.basis and back.scores.notes == found.scores.notes
    np.testing.assert_array_equal(back.scores.copying, found.scores.copying)
    np.testing.assert_array_equal(back.composition.v, found.composition.v)
    scores = measure_repeated(bundled, seq_len=12, batch=2)
    back = from_bytes(to_bytes(scores), RepeatedScores)
    np.testing.assert_array_equal(back.induction, scores.induction)
    assert (back.seq_len, back.batch) == (12, 2)
