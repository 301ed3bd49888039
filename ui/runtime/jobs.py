"""One bounded pool for every costly request: estimated, queued fairly, and stoppable.

Every request whose cost grows with its input (a capture, scores over a corpus, ablation,
patching, a sweep, a kernel report, a CSV of a long pattern) runs here, never in a page's own
thread. A job is typed: its key (:class:`JobKey` ``[R]``) says what it computes and the type of
its result, and the pool hands back an ``R``. Before a job starts, its
:class:`models.cost.Cost` (FLOPs, fixed seconds and peak memory, estimated from the model's size
and the input) is timed at the rate this machine measured for that kind of job
(:class:`Throughput`) and checked against the operator's limits; a request that would not fit
is refused with a message instead of being left to the kernel's out-of-memory killer.

Fairness: at most ``heavy_jobs`` heavy jobs run at once and the rest wait in order; work expected
to take under :data:`LIGHT_S` seconds has its own two workers, so it never waits behind a long
job. A session's new request of one kind supersedes its previous one (the old work stops when
nobody else waits on it), and one session may have at most ``jobs_per_session`` jobs waiting.
Two sessions asking for the same key share one job.

Work reports through :mod:`models.progress` and is stopped by its callback raising
:class:`~models.progress.Cancelled`. Finished results go to :attr:`JobPool.results`; a job that
fails or is cancelled stores nothing. Work that has something to show before it finishes (text
generated so far) writes it to a :class:`Partial` the page hands to :meth:`JobPool.submit`; the
progress panel shows it. No Streamlit here: :mod:`ui.widgets.job_view` draws jobs.

With a cluster (:attr:`JobPool.cluster`, ``ATLAS_RAY_ADDRESS``: :mod:`ui.runtime.cluster`),
the admission above stays here and the work of every key kind the cluster runs is a call on its
model's worker there; a cluster that stops answering leaves the work to this process.
"""

from __future__ import annotations

import statistics
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, cast

from models.cost import Cost
from models.errors import UserError
from models.progress import Cancelled, Progress
from ui.runtime.janitor import release_memory
from ui.runtime.kept_results import KeptResults
from ui.runtime.settings import Settings
from ui.runtime.store import JobKey, R, ResultStore

LIGHT_S = 3.0  # work expected to take less than this never queues behind heavy work
MIN_LEARN_S = 1.0  # shorter jobs are mostly untimed overhead: they teach nothing
GIB = 1024**3

Work = Callable[[Progress], R]


class RefusedError(UserError):
    """The server will not run a request: too large for its limits, or too many waiting."""


class OverLimitError(RefusedError):
    """The request's estimate exceeds the operator's limit on one job's memory or time."""


class WorkerLost(UserError):
    """The cluster worker running a job died before it finished (a retry runs it again)."""


class ClusterUnavailable(Exception):
    """The cluster cannot be reached (its message says so, for the operator's notice)."""


class RunHere(Exception):
    """The cluster cannot run this job from its key alone (an input it does not hold, such as
    an uploaded corpus): this process runs it, and nothing is wrong with the cluster."""


class Remote(Protocol):
    """Where the pool's work runs past this process (:class:`ui.runtime.cluster.Cluster`)."""

    notice: str | None

    def runs(self, key: JobKey[Any]) -> bool: ...

    def run(self, key: JobKey[R], report: Progress, partial: Partial | None = None) -> R: ...

    def lookup(self, key: JobKey[R]) -> R | None: ...


class Throughput:
    """How fast this machine does each kind of job, so estimates come from it as it is now.

    Every kind starts at the estimator's own figure (:meth:`models.cost.Cost.seconds` at the
    assumed rate) and follows how much slower or faster each finished job of that kind was than
    that figure, weighting the newest most: ``factor <- 0.3 * factor + 0.7 * measured / assumed``.
    Jobs estimated under :data:`MIN_LEARN_S` teach nothing: their time is mostly overhead no
    estimate models (a model's 30 layers of Python for a 6-token prompt), and a factor learnt
    from them would refuse every ordinary request after them as too slow.

    A kind this machine has not run yet borrows the median factor of the kinds it has run for
    its arithmetic (``flops``; its fixed seconds stay as estimated): the assumed rate is one
    figure for every CPU, and how far this machine's arithmetic is from it shows in every kind
    alike (measured by ``python -m benchmarks.estimates``: on SmolLM2 the atlas, corpus scores,
    ablation and capture ran 2.4-4.1x faster than assumed on a 2-core AMD EPYC), so the first
    atlas after a few captures is priced from them. Fixed seconds (Python per generated token,
    hooks per layer) do not follow a matmul rate, so they are not scaled by another kind's; and
    only kinds whose estimate is mostly arithmetic are lent from (reading the English corpus is
    estimated as a few fixed seconds and takes a few milliseconds: lent, its factor priced a
    24-text ablation on SmolLM2 at about 5 s).
    """

    def __init__(self) -> None:
        self._factors: dict[str, float] = {}
        self._arithmetic: set[str] = set()  # kinds whose factor is lent to kinds not yet run
        self._lock = threading.Lock()

    def seconds(self, kind: str, cost: Cost) -> float:
        """Seconds ``cost`` should take for a job of ``kind`` on this machine."""
        with self._lock:
            factor = self._factors.get(kind)
            if factor is not None:
                return cost.seconds() * factor
            lent = [self._factors[k] for k in self._arithmetic]
            borrowed = statistics.median(lent) if lent else 1.0
            return (cost.seconds() - cost.overhead_s) * borrowed + cost.overhead_s

    def record(self, kind: str, cost: Cost, seconds: float) -> None:
        """Learn from a finished job of ``kind`` that took ``seconds``."""
        assumed = cost.seconds()
        if assumed < MIN_LEARN_S or seconds <= 0:
            return
        with self._lock:
            old, measured = self._factors.get(kind), seconds / assumed
            self._factors[kind] = measured if old is None else 0.3 * old + 0.7 * measured
            if cost.overhead_s <= assumed / 2:  # mostly arithmetic: the machine's rate shows
                self._arithmetic.add(kind)


class Partial:
    """What running work has produced so far, shown while it runs (the side channel of
    streaming work, e.g. the text a model has written).

    The page creates one and passes it to :meth:`JobPool.submit` (it becomes :attr:`Job.partial`);
    the work, a closure holding the same object, calls :meth:`update` as it goes. The text is
    replaced whole, never edited in place, so the page's thread reads the old or the new value,
    never half of one. Plain text: whoever shows it escapes it.
    """

    def __init__(self) -> None:
        self.text = ""

    def update(self, text: str) -> None:
        self.text = str(text)


@dataclass(eq=False)
class Job(Generic[R]):
    """One piece of work, queued or running, whose result is an ``R``.

    Attributes:
        key: what the result is stored under.
        label: what the work is, in words.
        estimate_s: the expected duration before it starts.
        submitted, started: ``time.monotonic()`` stamps (``started`` is None while queued).
        fraction, text: the latest progress report.
        waiters: the sessions waiting on the result.
        partial: what the work has produced so far (streaming work only), or None.
    """

    key: JobKey[R]
    label: str
    estimate_s: float | None
    submitted: float = field(default_factory=time.monotonic)
    started: float | None = None
    fraction: float = 0.0
    text: str = "waiting for a free worker"
    waiters: set[str] = field(default_factory=set)
    cancel_event: threading.Event = field(default_factory=threading.Event)
    future: Future[R] | None = None
    cost: Cost | None = None
    alive: Callable[[str], bool] | None = None
    shown_left: float | None = None
    partial: Partial | None = None

    @property
    def kind(self) -> str:
        return kind_of(self.key)

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

    def left_for_display(self, now: float | None = None) -> tuple[float | None, bool]:
        """Time left as a page shows it, and whether it was revised upwards.

        Never creeps up: a new figure above the last one shown is shown only when it is more
        than a quarter above it, and then flagged, so a busy server reads as "revised", not
        as a clock going backwards.
        """
        left = self.seconds_left(now)
        if left is None or self.shown_left is None:
            self.shown_left = left
            return left, False
        if left <= self.shown_left:
            self.shown_left = left
            return left, False
        if left > 1.25 * self.shown_left + 2.0:
            self.shown_left = left
            return left, True
        return self.shown_left, False


def kind_of(key: object) -> str:
    """The kind of work ``key`` stands for: its class's name."""
    return key.kind if isinstance(key, JobKey) else type(key).__name__


def forget_frames(err: BaseException) -> None:
    """Clear the local variables of every finished frame ``err`` (and each exception it chains)
    passed through. The traceback keeps its files and lines for the operator's log."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if current.__traceback__ is not None:
            traceback.clear_frames(current.__traceback__)
        current = current.__cause__ or current.__context__


class JobPool:
    """The process-wide pool (see the module docstring)."""

    def __init__(
        self,
        settings: Settings | None = None,
        results: ResultStore | None = None,
        kept: KeptResults | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self._executor = ThreadPoolExecutor(
            max_workers=self.settings.heavy_jobs, thread_name_prefix="atlas-job"
        )
        self._light = ThreadPoolExecutor(max_workers=2, thread_name_prefix="atlas-light")
        self._lock = threading.Lock()
        self._jobs: dict[JobKey[Any], Job[Any]] = {}
        self.results = (
            results
            if results is not None  # an empty store is falsy (it has a length)
            else ResultStore(max_entries=64, max_bytes=self.settings.result_bytes)
        )
        self.throughput = Throughput()
        self.kept = kept
        self.alive: Callable[[str], bool] | None = None  # set by the page side
        self.cluster: Remote | None = None  # set by the server when ATLAS_RAY_ADDRESS is

    def finished(self, key: JobKey[R]) -> R | None:
        """The finished result for ``key``: in memory, or kept on disk from an earlier run."""
        found = self.results.get(key)
        if found is None and self.kept is not None:
            found = self.kept.load(key)
            if found is not None:
                self.results.put(key, found)
        if found is None and self.cluster is not None and self.cluster.runs(key):
            found = self.cluster.lookup(key)
            if found is not None:
                self.results.put(key, found)
        return found

    def estimate(self, key: JobKey[Any], cost: Cost | None) -> float | None:
        """Seconds ``cost`` should take on this machine for a job of ``key``'s kind."""
        if cost is None:
            return None
        return self.throughput.seconds(kind_of(key), cost)

    def check(self, label: str, cost: Cost | None, key: JobKey[Any] | None = None) -> None:
        """Refuse, with a message, work larger than the operator allows one job to be.

        Raises:
            OverLimitError: the estimate exceeds ``job_mb`` of memory or ``job_max_s`` of time.
        """
        if cost is None:
            return
        if cost.peak_bytes > self.settings.job_bytes:
            raise OverLimitError(
                f"{label} would need about {cost.peak_bytes / GIB:.1f} GiB of memory; this "
                f"server lets one request use at most {self.settings.job_bytes / GIB:.1f} GiB. "
                "Use a shorter text, fewer texts or a smaller batch."
            )
        seconds = self.throughput.seconds(kind_of(key), cost) if key is not None else cost.seconds()
        if seconds > self.settings.job_max_s:
            raise OverLimitError(
                f"{label} would take about {seconds / 60:.0f} min on this server, which runs "
                f"requests of at most {self.settings.job_max_s / 60:.0f} min. Use a shorter "
                "text, fewer texts or fewer heads."
            )

    def submit(
        self,
        key: JobKey[R],
        label: str,
        work: Work[R],
        estimate_s: float | None = None,
        waiter: str = "",
        cost: Cost | None = None,
        partial: Partial | None = None,
    ) -> Job[R]:
        """The job computing ``key``: the one already queued or running, or a new one.

        A new job is checked against the limits first; a session's earlier job of the same
        kind stops waiting for this session. ``partial`` is where ``work`` writes what it has
        so far (kept only by a new job: a running one keeps the one its work writes to).

        Raises:
            RefusedError: over the limits, or the session already has too many jobs waiting.
        """
        with self._lock:
            job = self._jobs.get(key)
        if job is None:
            self.check(label, cost, key)
        with self._lock:
            job = self._jobs.get(key)
            if job is None:
                if cost is not None:
                    estimate_s = self.estimate(key, cost)
                self._make_room(key, waiter, estimate_s is not None and estimate_s < LIGHT_S)
                job = Job(
                    key=key,
                    label=label,
                    estimate_s=estimate_s,
                    cost=cost,
                    alive=self.alive,
                    partial=partial,
                )
                self._jobs[key] = job
                job.future = (self._light if job.light else self._executor).submit(
                    self._run, job, work
                )
            job.waiters.add(waiter)
        return job

    def _make_room(self, key: JobKey[Any], waiter: str, light: bool) -> None:
        """Supersede ``waiter``'s other jobs of this kind; refuse one job too many (locked).

        Light jobs (expected under :data:`LIGHT_S`) are not counted, nor refused: a session
        has at most one job of each kind, so its light ones are few and end within seconds,
        and a page that draws several views of a held run asks for them in one pass."""
        if not waiter:
            return
        kind = kind_of(key)
        mine = [job for job in self._jobs.values() if waiter in job.waiters]
        for job in mine:
            if job.kind == kind:
                self._leave(job, waiter)
        waiting = [job for job in self._jobs.values() if waiter in job.waiters and not job.light]
        if not light and len(waiting) >= self.settings.jobs_per_session:
            raise RefusedError(
                f"You already have {len(waiting)} requests running or waiting on this server. "
                "Cancel one, or wait for one to finish."
            )

    def _run(self, job: Job[R], work: Work[R]) -> R:
        try:
            job.report(0.0, "starting")
            job.started = time.monotonic()
            value = self._work(job, work)
            seconds = time.monotonic() - job.started
            if job.cost is not None:
                self.throughput.record(job.kind, job.cost, seconds)
            self.results.put(job.key, value)
            if self.kept is not None and self.kept.wanted(job.key, seconds):
                self.kept.save(job.key, value)
            return value
        except BaseException as err:
            # The exception travels on in the job's future, and its traceback would keep every
            # frame of the work alive with its locals (a stopped generation's KV cache, say)
            # for as long as the future is held. Drop those locals, then hand what they held
            # back to the system at once (the allocator keeps freed blocks otherwise).
            forget_frames(err)
            release_memory()
            raise
        finally:
            with self._lock:
                if self._jobs.get(job.key) is job:
                    del self._jobs[job.key]

    def _work(self, job: Job[R], work: Work[R]) -> R:
        """The job's result: from the cluster when it runs this kind, else from ``work``."""
        cluster = self.cluster
        if cluster is not None and cluster.runs(job.key):
            try:
                return cluster.run(job.key, job.report, job.partial)
            except ClusterUnavailable:
                pass  # the cluster's notice says so; the work runs here
            except RunHere:
                pass  # an input only this process holds
        return work(job.report)

    def get(self, key: JobKey[R]) -> Job[R] | None:
        with self._lock:
            return cast("Job[R] | None", self._jobs.get(key))

    def busy(self) -> bool:
        """Whether any job is queued or running."""
        with self._lock:
            return bool(self._jobs)

    def ahead(self, job: Job[Any]) -> int:
        """How many queued or running heavy jobs were submitted before ``job`` (0 once it runs)."""
        if job.started is not None:
            return 0
        with self._lock:
            return sum(
                1
                for other in self._jobs.values()
                if other is not job and other.submitted <= job.submitted and not other.light
            )

    def cancel(self, job: Job[Any], waiter: str = "") -> None:
        """Stop waiting on ``job``; the work stops when nobody else waits on it."""
        with self._lock:
            self._leave(job, waiter)

    def _leave(self, job: Job[Any], waiter: str) -> None:
        job.waiters.discard(waiter)
        if job.waiters:
            return
        job.cancel_event.set()
        if job.future is not None and job.future.cancel() and self._jobs.get(job.key) is job:
            del self._jobs[job.key]  # never started

    def shutdown(self) -> None:
        """Stop taking work and cancel what waits (tests and server restarts)."""
        with self._lock:
            for job in list(self._jobs.values()):
                job.waiters.clear()
                job.cancel_event.set()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._light.shutdown(wait=False, cancel_futures=True)
