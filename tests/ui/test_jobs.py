"""The heavy-work pool: one job per key, a queue in order, progress, cancel, stored results."""

import gc
import threading
import time
import weakref

import pytest

from models.heads.store import ResultStore
from models.progress import Cancelled
from ui.jobs import Janitor, Job, JobPool


def blocking_work(release: threading.Event, steps: int = 4, result="done"):
    def work(progress):
        for i in range(steps):
            progress(i / steps, f"step {i}")
            assert release.wait(10)
        return result
    return work


def test_one_job_per_key_and_the_result_is_kept():
    pool, release = JobPool(workers=1), threading.Event()
    a = pool.submit("k", "work", blocking_work(release), waiter="s1")
    b = pool.submit("k", "work", blocking_work(release), waiter="s2")
    assert a is b and a.waiters == {"s1", "s2"}
    release.set()
    assert a.future.result(10) == "done"
    assert pool.results.get("k") == "done" and pool.get("k") is None


def test_queue_order_and_place():
    pool, release = JobPool(workers=1), threading.Event()
    first = pool.submit("a", "first", blocking_work(release))
    second = pool.submit("b", "second", blocking_work(release))
    third = pool.submit("c", "third", blocking_work(release))
    assert pool.ahead(second) == 1 and pool.ahead(third) == 2
    release.set()
    assert [j.future.result(10) for j in (first, second, third)] == ["done"] * 3


def test_cancel_stops_the_work_only_when_nobody_else_waits():
    pool, release, started = JobPool(workers=1), threading.Event(), threading.Event()
    seen = []

    def work(progress):
        started.set()
        for i in range(1000):
            progress(i / 1000, f"step {i}")
            seen.append(i)
            release.wait(0.01)
        return "finished"

    job = pool.submit("k", "long work", work, waiter="s1")
    pool.submit("k", "long work", work, waiter="s2")
    assert started.wait(10)
    pool.cancel(job, "s1")
    assert not job.cancel_event.is_set()
    pool.cancel(job, "s2")
    with pytest.raises(Cancelled):
        job.future.result(10)
    assert len(seen) < 1000 and pool.results.get("k") is None and pool.get("k") is None


def test_a_queued_job_cancelled_never_runs():
    pool, release = JobPool(workers=1), threading.Event()
    pool.submit("a", "first", blocking_work(release))
    ran = []
    queued = pool.submit("b", "second", lambda progress: ran.append(1))
    pool.cancel(queued)
    release.set()
    assert queued.future.cancelled() and not ran and pool.get("b") is None


def test_failures_store_nothing():
    pool = JobPool(workers=1)

    def broken(progress):
        raise ValueError("no")

    job = pool.submit("k", "broken", broken)
    with pytest.raises(ValueError):
        job.future.result(10)
    assert pool.results.get("k") is None and pool.get("k") is None


def test_time_left_moves_from_the_estimate_to_the_measured_rate():
    job = Job(key="k", label="x", estimate_s=100.0)
    assert job.seconds_left(now=0.0) == 100.0  # queued: the estimate
    job.started = 0.0
    job.fraction = 0.01
    assert job.seconds_left(now=10.0) == pytest.approx(90.0)  # too early to measure
    job.fraction = 0.5  # half done in 10 s: the rate says 10 s more
    assert job.seconds_left(now=10.0) == pytest.approx(10.0)
    job.fraction = 0.125  # halfway to trusting the rate: 0.5 * 70 + 0.5 * 90
    assert job.seconds_left(now=10.0) == pytest.approx(80.0)


def test_estimates_follow_what_this_machine_measured():
    pool = JobPool(workers=1)
    assert pool.throughput.seconds("capture", 4e10) == pytest.approx(2.0)  # the default rate
    pool.throughput.record("capture", 1e10, 1.0)  # 1e10 per second measured
    assert pool.throughput.seconds("capture", 1e10) == pytest.approx(1.0)
    pool.throughput.record("capture", 3e10, 1.0)
    assert pool.throughput.seconds("capture", 2e10) == pytest.approx(1.0)  # mean of 1e10, 3e10
    job = pool.submit("k", "x", lambda progress: 1, cost=("other", 2e10))
    assert job.estimate_s == pytest.approx(1.0)
    job.future.result(10)
    assert pool.throughput.seconds("other", 2e10) < 1.0  # that job took far less than a second


def test_results_are_bounded_in_bytes():
    class Blob:
        def __init__(self, n):
            self.nbytes = n

    store = ResultStore(max_entries=10, max_bytes=100)
    for i in range(4):
        store.put(i, Blob(40))
    assert [k for k in range(4) if store.get(k) is not None] == [2, 3]
    store.put("big", Blob(500))  # the newest always stays, alone
    assert store.get("big") is not None and store.get(3) is None


def test_short_work_does_not_queue_behind_heavy_work():
    pool, release = JobPool(workers=1), threading.Event()
    heavy = pool.submit("heavy", "long capture", blocking_work(release), estimate_s=300.0)
    quick = pool.submit("quick", "short prompt", lambda progress: "fast", estimate_s=0.2)
    assert quick.future.result(10) == "fast" and not heavy.future.done()
    release.set()
    assert heavy.future.result(10) == "done"


def test_work_stops_when_every_waiting_session_has_gone():
    pool, started = JobPool(workers=1), threading.Event()
    alive = {"s1": True}
    pool.alive = lambda sid: alive.get(sid, False)

    def work(progress):
        started.set()
        for i in range(10_000):
            progress(i / 10_000, "step")
            threading.Event().wait(0.001)
        return "finished"

    job = pool.submit("k", "long", work, waiter="s1")
    assert started.wait(10)
    alive["s1"] = False  # the browser tab closed
    with pytest.raises(Cancelled):
        job.future.result(10)


def test_janitor_drops_what_nobody_used_lately():
    store = ResultStore()
    store.put("old", 1)
    janitor = Janitor([store], idle_s=60)
    assert janitor.sweep(now=time.monotonic() + 30) == 0 and store.get("old") == 1
    assert janitor.sweep(now=time.monotonic() + 120) == 1 and store.get("old") is None


def test_janitor_collects_left_over_cycles_only_while_no_job_runs():
    class Node:
        pass

    busy = [True]
    janitor = Janitor([ResultStore()], idle_s=60, busy=lambda: busy[0])
    node = Node()
    node.me = node  # a cycle: only the collector frees it
    gone = weakref.ref(node)
    del node
    gc.disable()
    try:
        janitor.sweep(now=time.monotonic() + 30)
        assert gone() is not None  # too soon
        janitor.sweep(now=time.monotonic() + 120)
        assert gone() is not None  # a job is running: never stall it with a full collection
        busy[0] = False
        janitor.sweep(now=time.monotonic() + 120)
        assert gone() is None
    finally:
        gc.enable()
