"""The heavy work on a Ray cluster (``ATLAS_RAY_ADDRESS``): models resident in workers shared by
every front end, finished results shared by content.

Only imported when the operator set ``ATLAS_RAY_ADDRESS``; without it nothing imports Ray. The
pool's admission stays in the front end (:mod:`ui.runtime.jobs`: estimates, refusals, quotas,
supersede, Cancel); what runs on the cluster is the work of a key kind registered in
:mod:`ui.runtime.job_work`, sent as the key itself (a frozen dataclass of validated fields,
never code from a visitor) and computed from it as the pages compute it.

- :class:`ModelWorker`: one named actor per (model, dtype, device), created by whichever front
  end asks first (``get_if_exists``) and kept while the cluster runs (``detached``), placed by
  Ray on a node with the GPUs and memory it asks for (``ATLAS_RAY_GPUS``,
  ``ATLAS_RAY_MODEL_MB``). It loads its model once, through the app's own loader, and is
  restarted by Ray when it dies (the model is loaded again on its next job). A job reports its
  progress to the worker, which the front end polls; Cancel sets the job's flag there, and the
  work stops at its next progress report.
- :class:`SharedResults`: one named actor holding finished results by the SHA-256 of their key
  (:func:`ui.runtime.kept_results.key_name`), bounded in bytes (``ATLAS_RAY_RESULT_MB``), so a
  second front end finds a result the first one computed.

Results travel in the store's compact form (:func:`ui.runtime.result_codec.encode`: a JSON tree
and plain-number arrays, which Ray's object store hands over without copying on one node) and
are rebuilt by the type the key declares. No Streamlit here.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any

import ray
from ray.actor import ActorProxy
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RaySystemError

from models.model.handle import ModelHandle
from models.progress import Cancelled, Progress, quiet
from ui.runtime import job_work
from ui.runtime.jobs import ClusterUnavailable, Partial, WorkerLost
from ui.runtime.kept_results import key_name
from ui.runtime.models import ModelStore
from ui.runtime.policy import AllowedSpec, admit
from ui.runtime.result_codec import decode_result, encode
from ui.runtime.settings import MIB, Settings
from ui.runtime.store import JobKey, R, ResultStore

NAMESPACE = "attention-atlas"
RESULTS_NAME = "atlas-results"
POLL_S = 0.1  # how often a front end asks a running job for its progress
CALL_S = 30.0  # the longest a front end waits for a small call (progress, a lookup)
PROBE_S = 5.0  # how long a front end waits for the cluster's port when it starts
RESTART_S = 120.0  # the longest a job waits for its worker to be restarted
Encoded = tuple[Any, list[Any]]


def nbytes(encoded: Encoded) -> int:
    return sum(int(getattr(a, "nbytes", 0)) for a in encoded[1]) + len(repr(encoded[0]))


class SharedResults:
    """Finished results by content key, least recently used first out past ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, Encoded] = OrderedDict()
        self._sizes: dict[str, int] = {}

    @ray.method
    def get(self, name: str) -> Encoded | None:
        found = self._items.get(name)
        if found is not None:
            self._items.move_to_end(name)
        return found

    @ray.method
    def put(self, name: str, encoded: Encoded) -> None:
        self._items[name] = encoded
        self._items.move_to_end(name)
        self._sizes[name] = nbytes(encoded)
        while len(self._items) > 1 and sum(self._sizes.values()) > self.max_bytes:
            oldest = next(iter(self._items))
            del self._items[oldest]
            del self._sizes[oldest]

    @ray.method
    def names(self) -> list[str]:
        return list(self._items)


class ModelWorker:
    """One model's worker (see the module docstring): runs registered job kinds on its model."""

    def __init__(self, allowed: AllowedSpec, settings: Settings) -> None:
        self.allowed = admit(allowed.spec, settings)  # the worker applies the policy again
        self.settings = settings
        self.models = ModelStore(settings.model_bytes, settings.cache)
        self.results = ResultStore(max_entries=32, max_bytes=settings.result_bytes)
        self.shared: ActorProxy[SharedResults] = ray.get_actor(RESULTS_NAME, namespace=NAMESPACE)
        self.loads = 0
        self.computed = 0
        self.stopped = 0
        self._lock = threading.Lock()
        self._flags: dict[str, threading.Event] = {}
        self._progress: dict[str, tuple[float, str]] = {}
        self._partials: dict[str, Partial] = {}

    @ray.method
    def info(self) -> dict[str, int]:
        """This worker's process id, how many times it loaded its model, how many results it
        computed (rather than found), how many jobs run now and how many were stopped."""
        return {
            "pid": os.getpid(),
            "loads": self.loads,
            "computed": self.computed,
            "running": len(self._progress),
            "stopped": self.stopped,
        }

    def _model(self) -> ModelHandle:
        with self._lock:
            loaded = self.models.loaded(self.allowed)
            if loaded is None:
                loaded = self.models.get(self.allowed)
                self.loads += 1
            return loaded

    @ray.method
    def run(self, job_id: str, key: JobKey[Any]) -> tuple[Encoded, float]:
        """``key``'s result in the compact form, and the seconds its work took here."""
        if not job_work.runs(key):
            raise TypeError(f"{type(key).__name__} is not work a cluster worker runs")
        if job_work.spec_of(key).spec != self.allowed.spec:
            raise TypeError("this job belongs to another model's worker")
        flag = self._flags.setdefault(job_id, threading.Event())
        self._progress[job_id] = (0.0, "starting")
        partial = self._partials[job_id] = Partial()

        def progress(fraction: float, text: str) -> None:
            if flag.is_set():
                raise Cancelled("Stopped.")
            self._progress[job_id] = (float(fraction), str(text))

        start = time.perf_counter()
        try:
            value = self._resolve(key, progress, partial)
            encoded = encode(value)
            ray.get(self.shared.put.remote(key_name(key), encoded))
            return encoded, time.perf_counter() - start
        except Cancelled:
            self.stopped += 1
            raise
        finally:
            self._flags.pop(job_id, None)
            self._progress.pop(job_id, None)
            self._partials.pop(job_id, None)

    def _resolve(
        self, key: JobKey[R], progress: Progress = quiet, partial: Partial | None = None
    ) -> R:
        """``key``'s result: kept here, shared by another worker, or computed now."""

        def compute() -> R:
            encoded: Encoded | None = ray.get(self.shared.get.remote(key_name(key)))
            if encoded is not None:
                return decode_result(key, encoded[0], encoded[1])
            value = job_work.compute(key, self._model(), self._dependency, progress, partial)
            self.computed += 1
            return value

        return self.results.get_or_compute(key, compute)

    def _dependency(self, key: JobKey[R]) -> R:
        value = self._resolve(key)
        ray.get(self.shared.put.remote(key_name(key), encode(value)))
        return value

    @ray.method
    def progress(self, job_id: str) -> tuple[float, str, str]:
        """The job's last progress report and what it has produced so far (streaming work)."""
        fraction, text = self._progress.get(job_id, (0.0, "waiting for the worker"))
        partial = self._partials.get(job_id)
        return fraction, text, partial.text if partial is not None else ""

    @ray.method
    def cancel(self, job_id: str) -> None:
        """Stop the job at its next progress report (or before it starts)."""
        self._flags.setdefault(job_id, threading.Event()).set()


def worker_name(allowed: AllowedSpec) -> str:
    """The named actor for ``allowed`` (its model, dtype and device): one per cluster."""
    digest = hashlib.sha256(repr(allowed.spec).encode("utf-8")).hexdigest()[:24]
    return f"atlas-model-{digest}"


class Cluster:
    """A front end's connection to the cluster: runs the pool's work there (see the module)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.notice: str | None = None
        self.transfer_s = 0.0  # seconds spent moving results from workers, in all
        self.compute_s = 0.0  # seconds workers spent computing them
        self._workers: dict[str, ActorProxy[ModelWorker]] = {}
        self._lock = threading.Lock()
        self.shared: ActorProxy[SharedResults] = (
            ray.remote(SharedResults)
            .options(
                name=RESULTS_NAME,
                namespace=NAMESPACE,
                get_if_exists=True,
                lifetime="detached",
                num_cpus=0,
                max_restarts=-1,
            )
            .remote(settings.ray_result_bytes)
        )

    def runs(self, key: JobKey[Any]) -> bool:
        return job_work.runs(key)

    def worker(self, allowed: AllowedSpec) -> ActorProxy[ModelWorker]:
        """The worker actor of ``allowed``'s model, created by the first front end to ask."""
        name = worker_name(allowed)
        with self._lock:
            found = self._workers.get(name)
            if found is None:
                gpu = allowed.spec.device == "cuda"
                memory = self.settings.ray_model_mb
                found = (
                    ray.remote(ModelWorker)
                    .options(
                        name=name,
                        namespace=NAMESPACE,
                        get_if_exists=True,
                        lifetime="detached",
                        max_restarts=-1,
                        max_task_retries=0,
                        max_concurrency=8,
                        num_cpus=0 if gpu else 1,
                        num_gpus=self.settings.ray_gpus if gpu else 0,
                        memory=memory * MIB if memory else None,
                    )
                    .remote(allowed, self.settings)
                )
                self._workers[name] = found
            return found

    def _until_up(self, actor: ActorProxy[ModelWorker], report: Progress) -> None:
        """Wait while Ray starts or restarts ``actor`` (a new worker imports torch first; a
        worker that died is unavailable until its process is back); ``report`` can stop the
        wait."""
        end = time.monotonic() + RESTART_S
        answer = actor.info.remote()
        while True:
            if ray.wait([answer], timeout=POLL_S)[0]:
                try:
                    ray.get(answer)
                    return
                except ActorUnavailableError:
                    answer = actor.info.remote()
            if time.monotonic() > end:
                raise GetTimeoutError("the worker did not start")
            report(0.0, "waiting for the model's worker to start")

    def lookup(self, key: JobKey[R]) -> R | None:
        """``key``'s result if any front end's job finished it, without computing it."""
        try:
            encoded = ray.get(self.shared.get.remote(key_name(key)), timeout=CALL_S)
        except (RayActorError, RaySystemError, GetTimeoutError, ConnectionError):
            return None
        if encoded is None:
            return None
        value = decode_result(key, encoded[0], encoded[1])
        return value

    def run(self, key: JobKey[R], report: Progress, partial: Partial | None = None) -> R:
        """``key``'s result, computed by its model's worker; ``report`` gets the worker's
        progress and stops the work by raising :class:`Cancelled`, and ``partial`` what the
        work has produced so far (streaming work), as often as progress is polled.

        Raises:
            WorkerLost: the worker died during the job (Ray restarts it; a retry works).
            ClusterUnavailable: the cluster cannot be reached (the job may run here instead).
        """
        actor = self.worker(job_work.spec_of(key))
        job_id = uuid.uuid4().hex
        try:
            self._until_up(actor, report)
            ref = actor.run.remote(job_id, key)
            start = time.perf_counter()
            try:
                while not ray.wait([ref], timeout=POLL_S)[0]:
                    fraction, text, so_far = ray.get(actor.progress.remote(job_id), timeout=CALL_S)
                    if partial is not None and so_far != partial.text:
                        partial.update(so_far)
                    report(fraction, text)
            except Cancelled:
                actor.cancel.remote(job_id)
                raise
            finished = time.perf_counter()
            encoded, seconds = ray.get(ref)
            value = decode_result(key, encoded[0], encoded[1])
        except RayActorError as err:
            raise WorkerLost(
                "The worker computing this stopped before it finished; it is starting "
                "again. Press Retry."
            ) from err
        except (RaySystemError, GetTimeoutError, ConnectionError) as err:
            self.notice = (
                "The Ray cluster did not answer; this server runs its work itself for now."
            )
            raise ClusterUnavailable(self.notice) from err
        with self._lock:
            self.compute_s += seconds
            self.transfer_s += max(finished - start - seconds, 0.0)
            self.transfer_s += time.perf_counter() - finished
        return value


def connect(settings: Settings) -> Cluster:
    """A connection to the cluster at ``settings.ray_address``.

    Raises:
        ClusterUnavailable: nothing answers there (the front end then runs everything itself).
    """
    address = settings.ray_address or ""
    missing = ClusterUnavailable(
        f"No Ray cluster answered at {address}; this server runs its work itself."
    )
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:  # Ray's own connection waits minutes for an address where nothing listens
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_S).close()
    except (OSError, ValueError) as err:
        raise missing from err
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            ignore_reinit_error=True,
            log_to_driver=False,
            configure_logging=False,
        )
        return Cluster(settings)
    except (ConnectionError, RaySystemError, RuntimeError, ValueError) as err:
        raise missing from err
