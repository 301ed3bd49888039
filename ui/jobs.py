"""One bounded pool for heavy work: a queue, progress with an estimate, and cancel.

Long captures, ablation, patching, sweeps and corpus scores run here, never in a page's own
thread. At most :data:`MAX_WORKERS` heavy jobs run at once (``ATLAS_HEAVY_JOBS``, default 1: on a
shared server a second heavy job only slows the first); the rest wait in submission order and a
page can tell its visitor their place. Work expected to finish within :data:`LIGHT_S` seconds
(a short prompt) has its own two workers, so it never waits behind a long capture. Two sessions asking for the same result (same key) share one job.
Work reports through :mod:`models.progress`: ``progress(fraction, text)``, which raises
:class:`models.progress.Cancelled` once every session waiting on the job has cancelled it.

Finished results are kept in :attr:`JobPool.results`, a least-recently-used store bounded in
count and in bytes (``ATLAS_RESULT_MB``, default 1,536); a job that fails or is cancelled
stores nothing. No Streamlit here: :mod:`ui.job_view` draws jobs.
"""

from __future__ import annotations

import ctypes
import gc
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

from models.heads.store import ResultStore
from models.progress import Cancelled, Progress

MAX_WORKERS = max(1, int(os.environ.get("ATLAS_HEAVY_JOBS", "1")))
RESULT_BYTES = int(float(os.environ.get("ATLAS_RESULT_MB", "1536")) * 1024**2)
IDLE_S = float(os.environ.get("ATLAS_IDLE_S", "600"))
LIGHT_S = 3.0  # work expected to take less than this never queues behind heavy work
Work = Callable[[Progress], Any]


@dataclass(eq=False)
class Job:
    """One piece of heavy work, queued or running.

    Attributes:
        key: what the result is stored under (holds everything that changes it).
        label: what the work is, in words.
        estimate_s: the expected duration before it starts, from model size and input length.
        submitted, started: ``time.monotonic()`` stamps (``started`` is None while queued).
        fraction, text: the latest progress report.
        waiters: the sessions waiting on the result.
    """

    key: Hashable
    label: str
    estimate_s: float | None
    submitted: float = field(default_factory=time.monotonic)
    started: float | None = None
    fraction: float = 0.0
    text: str = "waiting for a free worker"
    waiters: set[str] = field(default_factory=set)
    cancel_event: threading.Event = field(default_factory=threading.Event)
    future: Future | None = None
    cost: tuple[str, float] | None = None
    alive: Callable[[str], bool] | None = None

    @property
    def light(self) -> bool:
        """Expected to take less than :data:`LIGHT_S`: runs on the light workers."""
        return self.estimate_s is not None and self.estimate_s < LIGHT_S

    def report(self, fraction: float, text: str) -> None:
        """The progress callback handed to the work; raises Cancelled once cancelled, or once
        every session that asked for it has closed (nobody would see the result)."""
        if self.alive is not None and self.waiters and not any(map(self.alive, self.waiters)):
            self.cancel_event.set()
        if self.cancel_event.is_set():
            raise Cancelled(f"Stopped: {self.label}.")
        self.fraction = min(max(float(fraction), 0.0), 1.0)
        self.text = text

    def seconds_left(self, now: float | None = None) -> float | None:
        """Time left: the estimate at first, then more and more the measured rate."""
        now = time.monotonic() if now is None else now
        if self.started is None:
            return self.estimate_s
        elapsed = now - self.started
        guess = None if self.estimate_s is None else max(self.estimate_s - elapsed, 0.0)
        if self.fraction < 0.02:
            return guess
        measured = elapsed / self.fraction * (1.0 - self.fraction)
        if guess is None:
            return measured
        trust = min(1.0, self.fraction / 0.25)  # a quarter of the way in, trust the measurement
        return trust * measured + (1.0 - trust) * guess


class Throughput:
    """Measured work per second for each kind of job, so estimates come from this machine.

    A kind starts at ``default`` FLOP/s (a conservative figure for two CPU cores) and follows
    each finished job: ``rate <- 0.5 * rate + 0.5 * measured``.
    """

    def __init__(self, default: float = 2e10) -> None:
        self.default = default
        self._rates: dict[str, float] = {}
        self._lock = threading.Lock()

    def seconds(self, kind: str, work: float) -> float:
        with self._lock:
            return work / self._rates.get(kind, self.default)

    def record(self, kind: str, work: float, seconds: float) -> None:
        if work <= 0 or seconds <= 0:
            return
        with self._lock:
            old = self._rates.get(kind)
            measured = work / seconds
            self._rates[kind] = measured if old is None else 0.5 * old + 0.5 * measured


class JobPool:
    """The process-wide pool (see the module docstring)."""

    def __init__(self, workers: int = MAX_WORKERS, keep: int = 24,
                 max_bytes: int | None = RESULT_BYTES) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="atlas-job")
        self._light = ThreadPoolExecutor(max_workers=2, thread_name_prefix="atlas-light")
        self._lock = threading.Lock()
        self._jobs: dict[Hashable, Job] = {}
        self.results = ResultStore(max_entries=keep, max_bytes=max_bytes)
        self.throughput = Throughput()
        self.alive: Callable[[str], bool] | None = None  # set by the page side

    def submit(self, key: Hashable, label: str, work: Work, estimate_s: float | None = None,
               waiter: str = "", cost: tuple[str, float] | None = None) -> Job:
        """The job computing ``key``: the one already queued or running, or a new one.

        ``cost`` is ``(kind, amount of work)``: the estimate then comes from what this machine
        measured on earlier jobs of that kind, and this job's time is recorded for later ones.
        """
        with self._lock:
            job = self._jobs.get(key)
            if job is None:
                if cost is not None:
                    estimate_s = self.throughput.seconds(*cost)
                job = Job(key=key, label=label, estimate_s=estimate_s, cost=cost,
                          alive=self.alive)
                self._jobs[key] = job
                job.future = (self._light if job.light else self._executor).submit(
                    self._run, job, work)
            job.waiters.add(waiter)
            return job

    def _run(self, job: Job, work: Work) -> Any:
        try:
            job.report(0.0, "starting")
            job.started = time.monotonic()
            value = work(job.report)
            if job.cost is not None:
                self.throughput.record(job.cost[0], job.cost[1], time.monotonic() - job.started)
            self.results.put(job.key, value)
            return value
        finally:
            with self._lock:
                if self._jobs.get(job.key) is job:
                    del self._jobs[job.key]

    def get(self, key: Hashable) -> Job | None:
        with self._lock:
            return self._jobs.get(key)

    def busy(self) -> bool:
        """Whether any job is queued or running."""
        with self._lock:
            return bool(self._jobs)

    def ahead(self, job: Job) -> int:
        """How many queued or running heavy jobs were submitted before ``job`` (0 once it runs)."""
        if job.started is not None:
            return 0
        with self._lock:
            return sum(1 for other in self._jobs.values()
                       if other is not job and other.submitted <= job.submitted
                       and not other.light)

    def cancel(self, job: Job, waiter: str = "") -> None:
        """Stop waiting on ``job``; the work stops when nobody else waits on it."""
        with self._lock:
            job.waiters.discard(waiter)
            if job.waiters:
                return
            job.cancel_event.set()
            if job.future is not None and job.future.cancel() and self._jobs.get(job.key) is job:
                del self._jobs[job.key]  # never started


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the operating system (glibc)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class Janitor:
    """Drops results and models nobody used for ``idle_s`` seconds, then frees their memory.

    Runs in one daemon thread that wakes every ``idle_s / 4`` seconds (at most 30). Memory is
    also collected once per ``idle_s`` while no job runs: a closed browser session lets go of
    what it held minutes after the janitor dropped the store's own reference, and an idle server
    allocates too little for Python's collector to notice the cycles left behind.
    """

    def __init__(self, stores: list[ResultStore], idle_s: float = IDLE_S,
                 busy: Callable[[], bool] = lambda: False) -> None:
        self.stores, self.idle_s, self.busy = stores, idle_s, busy
        self._collected = time.monotonic()
        self._thread: threading.Thread | None = None

    def sweep(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        dropped = sum(store.evict_idle(self.idle_s, now) for store in self.stores)
        if dropped or (now - self._collected >= self.idle_s and not self.busy()):
            release_memory()
            self._collected = now
        return dropped

    def start(self) -> None:
        if self._thread is not None:
            return

        def loop() -> None:
            while True:
                time.sleep(min(30.0, max(1.0, self.idle_s / 4)))
                self.sweep()

        self._thread = threading.Thread(target=loop, name="atlas-janitor", daemon=True)
        self._thread.start()


POOL = JobPool()
