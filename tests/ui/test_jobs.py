"""The heavy-work pool: one job per key, a queue in order, progress, cancel, stored results."""

import gc
import threading
import time
import traceback
import weakref
from dataclasses import dataclass

import pytest
import torch

from models.cost import ASSUMED_FLOPS, Cost
from models.progress import Cancelled
from ui.runtime.janitor import Janitor
from ui.runtime.jobs import MIN_LEARN_S, Job, JobPool, Partial, RefusedError
from ui.runtime.settings import Settings
from ui.runtime.store import JobKey, ResultStore


def pool_of(workers: int = 1, **settings) -> JobPool:
    return JobPool(Settings(heavy_jobs=workers, **settings))


def blocking_work(release: threading.Event, steps: int = 4, result="done"):
    def work(progress):
        for i in range(steps):
            progress(i / steps, f"step {i}")
            assert release.wait(10)
        return result

    return work


def test_one_job_per_key_and_the_result_is_kept():
    pool, release = pool_of(), threading.Event()
    a = pool.submit("k", "work", blocking_work(release), waiter="s1")
    b = pool.submit("k", "work", blocking_work(release), waiter="s2")
    assert a is b and a.waiters == {"s1", "s2"}
    release.set()
    assert a.future.result(10) == "done"
    assert pool.results.get("k") == "done" and pool.get("k") is None


def test_queue_order_and_place():
    pool, release = pool_of(), threading.Event()
    first = pool.submit("a", "first", blocking_work(release))
    second = pool.submit("b", "second", blocking_work(release))
    third = pool.submit("c", "third", blocking_work(release))
    assert pool.ahead(second) == 1 and pool.ahead(third) == 2
    release.set()
    assert [j.future.result(10) for j in (first, second, third)] == ["done"] * 3


def test_cancel_stops_the_work_only_when_nobody_else_waits():
    pool, release, started = pool_of(), threading.Event(), threading.Event()
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
    pool, release = pool_of(), threading.Event()
    pool.submit("a", "first", blocking_work(release))
    ran = []
    queued = pool.submit("b", "second", lambda progress: ran.append(1))
    pool.cancel(queued)
    release.set()
    assert queued.future.cancelled() and not ran and pool.get("b") is None


def test_failures_store_nothing():
    pool = pool_of()

    def broken(progress):
        raise ValueError("no")

    job = pool.submit("k", "broken", broken)
    with pytest.raises(ValueError):
        job.future.result(10)
    assert pool.results.get("k") is None and pool.get("k") is None


@pytest.mark.parametrize("stop", ["cancel", "fail"])
def test_a_stopped_jobs_memory_is_let_go_while_its_future_is_still_held(stop):
    """The future keeps the exception, and the exception its traceback: without clearing the
    work's frames, a cancelled generation's KV cache stayed in memory as long as the page held
    the future."""
    pool, started, refs = pool_of(), threading.Event(), []

    def inner(progress):
        held = torch.zeros(1024, 1024)  # what a real job holds in its frames: caches, rows
        refs.append(weakref.ref(held))
        started.set()
        for i in range(1000):
            progress(i / 1000, "working")
            if stop == "fail":
                raise ValueError("broken")
            time.sleep(0.01)

    def work(progress):
        try:
            inner(progress)
        except ValueError as err:
            raise RuntimeError("wrapped") from err  # a chained exception's frames too

    job = pool.submit("k", "holding work", work, waiter="s1")
    assert started.wait(10)
    if stop == "cancel":
        pool.cancel(job, "s1")
    with pytest.raises((Cancelled, RuntimeError)) as err:
        job.future.result(10)
    gc.collect()
    assert refs[0]() is None
    assert "inner" in "".join(traceback.format_exception(err.value))  # still logged in full


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


RATE = ASSUMED_FLOPS["cpu"]


def test_estimates_follow_what_this_machine_measured():
    pool = pool_of()
    four = Cost(flops=4 * RATE)  # four seconds at the assumed rate
    assert pool.throughput.seconds("RunKey", four) == pytest.approx(4.0)
    pool.throughput.record("RunKey", four, 8.0)  # this machine took twice as long
    assert pool.throughput.seconds("RunKey", Cost(flops=RATE)) == pytest.approx(2.0)
    pool.throughput.record("RunKey", four, 16.0)  # the newest weighs most: 0.3 * 2 + 0.7 * 4
    assert pool.throughput.seconds("RunKey", Cost(flops=RATE)) == pytest.approx(3.4)
    # fixed seconds scale with the rest: a machine twice as slow is slow at everything
    assert pool.throughput.seconds("RunKey", Cost(overhead_s=1.0)) == pytest.approx(3.4)
    job = pool.submit("k", "x", lambda progress: 1, cost=Cost(flops=5 * RATE))
    assert job.estimate_s == pytest.approx(5 * 3.4)  # not run yet: the others' factor
    job.future.result(10)
    assert pool.throughput.seconds("str", Cost(flops=5 * RATE)) < 1.0  # it took far less


def test_a_kind_not_run_yet_borrows_the_median_of_the_others():
    """Before a kind has run, its arithmetic is scaled by the median factor of the kinds this
    machine has run (the machine's speed shows in all of them) and its fixed seconds are
    kept; once it has run, its own factor scales both."""
    pool = pool_of()
    assert pool.throughput.seconds("AtlasKey", Cost(flops=RATE)) == pytest.approx(1.0)
    for kind, took in (("RunKey", 0.5), ("ScoresKey", 0.25), ("ImportanceKey", 4.0)):
        pool.throughput.record(kind, Cost(flops=RATE), took)  # each assumed 1 s
    assert pool.throughput.seconds("AtlasKey", Cost(flops=2 * RATE)) == pytest.approx(1.0)
    assert pool.throughput.seconds("RunKey", Cost(flops=2 * RATE)) == pytest.approx(1.0)
    fixed = Cost(flops=2 * RATE, overhead_s=3.0)
    assert pool.throughput.seconds("AtlasKey", fixed) == pytest.approx(1.0 + 3.0)
    pool.throughput.record("AtlasKey", Cost(flops=RATE), 3.0)
    assert pool.throughput.seconds("AtlasKey", Cost(flops=2 * RATE)) == pytest.approx(6.0)


def test_a_kind_estimated_in_fixed_seconds_lends_no_rate():
    """Reading a corpus is estimated as fixed seconds and may take a hundredth of them: its
    factor is its own, never lent to the arithmetic of kinds not yet run."""
    pool = pool_of()
    pool.throughput.record("CorpusKey", Cost(overhead_s=3.0), 0.03)  # factor 0.01
    assert pool.throughput.seconds("CorpusKey", Cost(overhead_s=3.0)) == pytest.approx(0.03)
    assert pool.throughput.seconds("ImportanceKey", Cost(flops=RATE)) == pytest.approx(1.0)
    pool.throughput.record("RunKey", Cost(flops=RATE), 0.5)
    assert pool.throughput.seconds("ImportanceKey", Cost(flops=RATE)) == pytest.approx(0.5)


def test_small_jobs_do_not_teach_the_rate():
    pool = pool_of()
    # a 6-token SmolLM2 prompt: 2e9 FLOPs (0.05 s assumed) in 6 s of hooks and Python
    pool.throughput.record("RunKey", Cost(flops=2e9), 6.0)
    assert pool.throughput.seconds("RunKey", Cost(flops=RATE)) == pytest.approx(1.0)
    enough = Cost(flops=MIN_LEARN_S * RATE)
    pool.throughput.record("RunKey", enough, 2 * MIN_LEARN_S)  # a real prompt does teach it
    assert pool.throughput.seconds("RunKey", Cost(flops=RATE)) == pytest.approx(2.0)


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
    pool, release = pool_of(), threading.Event()
    heavy = pool.submit("heavy", "long capture", blocking_work(release), estimate_s=300.0)
    quick = pool.submit("quick", "short prompt", lambda progress: "fast", estimate_s=0.2)
    assert quick.future.result(10) == "fast" and not heavy.future.done()
    release.set()
    assert heavy.future.result(10) == "done"


def test_work_stops_when_every_waiting_session_has_gone():
    pool, started = pool_of(), threading.Event()
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


@dataclass(frozen=True)
class CaptureKey(JobKey):
    prompt: str


@dataclass(frozen=True)
class ScoresKey(JobKey):
    corpus: str


def test_a_new_request_of_the_same_kind_stops_the_sessions_old_one():
    pool, release = pool_of(), threading.Event()
    pool.submit(ScoresKey("busy"), "keeps the worker busy", blocking_work(release), waiter="x")
    first = pool.submit(CaptureKey("a"), "first prompt", blocking_work(release), waiter="s1")
    shared = pool.submit(CaptureKey("b"), "another visitor's", blocking_work(release), waiter="s2")
    second = pool.submit(CaptureKey("c"), "second prompt", blocking_work(release), waiter="s1")
    assert first.cancel_event.is_set() and first.waiters == set()  # superseded: its work stops
    assert not shared.cancel_event.is_set() and not second.cancel_event.is_set()
    release.set()
    assert second.future.result(10) == "done" and shared.future.result(10) == "done"


def test_superseding_spares_a_job_another_session_waits_on():
    pool, release = pool_of(), threading.Event()
    pool.submit(ScoresKey("busy"), "busy", blocking_work(release), waiter="x")
    both = pool.submit(CaptureKey("a"), "shared", blocking_work(release), waiter="s1")
    pool.submit(CaptureKey("a"), "shared", blocking_work(release), waiter="s2")
    pool.submit(CaptureKey("b"), "s1 moves on", blocking_work(release), waiter="s1")
    assert both.waiters == {"s2"} and not both.cancel_event.is_set()
    release.set()


def test_one_session_may_queue_only_a_few_jobs():
    pool, release = pool_of(jobs_per_session=2), threading.Event()
    pool.submit(CaptureKey("a"), "one", blocking_work(release), waiter="s1")
    pool.submit(ScoresKey("c"), "two", blocking_work(release), waiter="s1")

    @dataclass(frozen=True)
    class Third(JobKey):
        n: int

    with pytest.raises(RefusedError, match="already have 2 requests"):
        pool.submit(Third(1), "three", blocking_work(release), waiter="s1")
    pool.submit(Third(2), "another visitor", blocking_work(release), waiter="s2")  # not refused
    release.set()


def test_light_jobs_are_not_counted_against_a_sessions_few():
    """A page asks for several small views of a held run in one pass: a job expected to take
    under LIGHT_S neither counts towards the session's limit nor is refused by it."""
    pool, release = pool_of(jobs_per_session=1), threading.Event()
    HEAVY = Cost(flops=30 * ASSUMED_FLOPS["cpu"])  # half a minute at the assumed rate
    pool.submit(CaptureKey("a"), "heavy", blocking_work(release), waiter="s1", cost=HEAVY)
    light = pool.submit(
        ScoresKey("v"), "a view", blocking_work(release), waiter="s1", cost=Cost(flops=1e3)
    )
    assert light.light and pool.get(ScoresKey("v")) is light
    with pytest.raises(RefusedError, match="already have 1 requests"):
        pool.submit(ScoresKey("w"), "heavy too", blocking_work(release), waiter="s1", cost=HEAVY)
    release.set()


def test_work_over_the_operators_limits_is_refused_before_it_starts():
    pool, ran = pool_of(job_mb=100, job_max_s=60), []
    with pytest.raises(RefusedError, match="GiB of memory"):
        pool.submit(
            "big",
            "Scoring",
            lambda p: ran.append(1),
            cost=Cost(overhead_s=1, peak_bytes=200 * 1024**2),
        )
    with pytest.raises(RefusedError, match="min on this server"):
        pool.submit("long", "Ablating", lambda p: ran.append(1), cost=Cost(overhead_s=3600))
    fits = Cost(flops=40 * RATE)  # 40 s at the assumed rate: under the limit of 60
    pool.throughput.record("str", fits, 80.0)  # a slow machine: the estimate follows it
    with pytest.raises(RefusedError):
        pool.submit("slow", "Reading", lambda p: ran.append(1), cost=fits)
    assert not ran and not pool.busy()


def test_the_time_left_shown_never_creeps_up():
    job = Job(key="k", label="x", estimate_s=100.0)
    job.started, job.fraction = 0.0, 0.3
    first, revised = job.left_for_display(now=10.0)
    assert not revised
    job.fraction = 0.31  # slower than expected, but only a little: keep the figure shown
    assert job.left_for_display(now=12.0) == (first, False)
    job.fraction = 0.32  # far slower: say so
    left, revised = job.left_for_display(now=60.0)
    assert revised and left > 1.25 * first


def test_a_step_does_not_repeat_the_jobs_label():
    from ui.widgets.job_view import step_text

    job = Job(key="k", label="Patching 270 heads", estimate_s=1.0)
    job.text = "patching 270 heads: pass 1 of 9"
    assert step_text(job) == "pass 1 of 9"
    job.text = "layer 3 of 30"
    assert step_text(job) == "layer 3 of 30"


def test_streaming_work_shows_what_it_has_so_far_through_its_partial():
    pool, release, halfway = pool_of(), threading.Event(), threading.Event()
    partial = Partial()

    def work(progress):
        for word in ("one", "two"):
            partial.update(f"{partial.text} {word}".strip())
            progress(0.5, word)
        halfway.set()
        assert release.wait(10)
        return partial.text

    job = pool.submit("stream", "writing", work, waiter="s1", partial=partial)
    assert halfway.wait(10)
    assert job.partial is partial and job.partial.text == "one two"
    again = pool.submit("stream", "writing", work, waiter="s2", partial=Partial())
    assert again is job and again.partial is partial  # the running work's, not the newcomer's
    release.set()
    assert job.future.result(10) == "one two"
    assert pool.submit("plain", "no stream", lambda p: 1).partial is None


def test_the_servers_stores_forget_views_of_closed_sessions(tmp_path):
    """The runtime's stores ask whether a session is still open: a view pinned by a closed
    session goes once idle, one pinned by an open session stays."""
    from ui.runtime.server import build

    open_sessions = {"open"}
    runtime = build(Settings(cache=tmp_path), alive=open_sessions.__contains__)
    for store in (runtime.pool.results, runtime.derived):
        store.put("kept", 1)
        store.pin("kept", "open")
        store.put("left", 2)
        store.pin("left", "closed")
        assert store.evict_idle(idle_s=0.0, now=1e12) == 1
        assert "kept" in store and "left" not in store
    runtime.stop()


def test_a_stopped_janitor_has_ended_its_thread():
    """Stopping waits for the sweeping thread, so none is left collecting at shutdown."""
    janitor = Janitor([ResultStore()], idle_s=4.0)
    janitor.start()
    thread = janitor._thread
    assert thread is not None and thread.is_alive()
    janitor.stop()
    assert not thread.is_alive()
