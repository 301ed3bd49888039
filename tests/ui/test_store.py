"""The result store: bounded in entries and bytes, what open sessions show is evicted last,
and sizes counted for arrays, tensors, strings and the dataclasses results are made of."""

from dataclasses import dataclass

import numpy as np
import torch

from ui.runtime.store import ResultStore, size_of


class Blob:
    def __init__(self, n):
        self.nbytes = n


def test_results_are_bounded_in_bytes_and_the_newest_stays():
    store = ResultStore(max_entries=10, max_bytes=100)
    for i in range(4):
        store.put(i, Blob(40))
    assert [k for k in range(4) if store.get(k) is not None] == [2, 3]
    store.put("big", Blob(500))
    assert store.get("big") is not None and store.get(3) is None


def test_a_view_an_open_session_shows_is_evicted_last():
    alive = {"teacher": True, "gone": False}
    store = ResultStore(max_entries=10, max_bytes=100, alive=lambda sid: alive.get(sid, False))
    store.put("teacher's run", Blob(40))
    store.pin("teacher's run", "teacher")
    store.put("closed tab's run", Blob(40))
    store.pin("closed tab's run", "gone")
    for i in range(5):  # another visitor floods the store with new prompts
        store.put(f"flood {i}", Blob(40))
    assert store.get("teacher's run") is not None
    assert store.get("closed tab's run") is None
    assert store.nbytes <= 100


def test_idle_eviction_spares_pinned_views():
    store = ResultStore(alive=lambda sid: True)
    store.put("shown", 1)
    store.pin("shown", "s1")
    store.put("unused", 2)
    assert store.evict_idle(idle_s=0.0, now=1e12) == 1
    assert store.get("shown") == 1


@dataclass(frozen=True)
class Report:
    patterns: np.ndarray
    tensors: list
    name: str


def test_sizes_count_what_a_result_holds():
    report = Report(np.zeros((10, 10), np.float32), [torch.zeros(25), "x" * 7], "abc")
    assert size_of(report) == 400 + 100 + 7 + 3
    shared = np.zeros(1000, np.uint8)
    assert size_of([shared, shared]) == 1000  # one object counted once
    assert size_of(Blob(123)) == 123


def test_only_finished_work_is_kept_and_the_least_recent_goes_first():
    import pytest

    store = ResultStore(max_entries=2)

    def interrupted():
        raise KeyboardInterrupt("the user changed an input")

    with pytest.raises(KeyboardInterrupt):
        store.get_or_compute("a", interrupted)
    assert "a" not in store and len(store) == 0
    assert store.get_or_compute("a", lambda: 1) == 1
    assert store.get_or_compute("a", lambda: 2) == 1  # kept
    store.put("b", 2)
    store.get("a")
    store.put("c", 3)  # b is the least recently used
    assert "b" not in store and store.get("a") == 1 and store.get("c") == 3


def test_a_view_is_counted_by_the_buffer_it_keeps_alive():
    """A result holding a small view of a large array keeps the large array in memory: the
    store counts what is held, not the view's extent (each buffer once)."""
    big = np.zeros((1000, 250), dtype=np.float32)  # 1,000,000 bytes
    assert size_of(big[:, 0]) == 1_000_000
    assert size_of([big[:, 0], big[1:, 3]]) == 1_000_000
    assert size_of(big[:, 0].copy()) == 4_000
    tensor = torch.zeros(1000, 250)
    assert size_of(tensor[:, 0].numpy()) == 1_000_000  # a NumPy view of torch storage
    assert size_of(tensor[0]) == 1_000_000
    assert size_of(tensor[0].clone()) == 1_000


def test_a_visitors_tabs_give_up_their_own_pins_before_another_visitors():
    """Four tabs of one browser pin a large result each; a fifth visitor's run, pinned first,
    stays when the first visitor's next run needs room: the visitor holding the most pinned
    bytes gives one up."""
    store = ResultStore(max_entries=10, max_bytes=100)
    store.put("fifth visitor's run", Blob(20))
    store.pin("fifth visitor's run", "b", visitor="client:10.0.0.2")
    for tab in range(4):
        store.put(f"tab {tab}", Blob(20))
        store.pin(f"tab {tab}", f"a{tab}", visitor="client:10.0.0.1")
    store.put("tab 4", Blob(20))
    store.pin("tab 4", "a4", visitor="client:10.0.0.1")
    assert store.get("fifth visitor's run") is not None
    assert store.get("tab 0") is None
    assert store.nbytes <= 100
