"""The server's shared state, created once: settings, models, the job pool, stores, janitor.

``app.py`` calls :func:`start` on every script run; only the first call creates anything (no
thread or pool starts on import). Everything shared between browser sessions hangs off the one
:class:`Runtime`, so a test can build its own with other settings (:func:`restart`). No
Streamlit here: the page side passes in how to tell whether a browser session is still open.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from models.model.allocator import keep_freed_blocks
from ui.runtime.janitor import Janitor
from ui.runtime.jobs import ClusterUnavailable, JobPool
from ui.runtime.kept_results import KeptResults
from ui.runtime.models import ModelStore
from ui.runtime.prompt_store import PromptStore
from ui.runtime.settings import MIB, Settings
from ui.runtime.store import ResultStore

DERIVED_MB = 128  # small values derived from results: pictures, sink positions, presets
KEPT_SHARE = 16  # results kept across restarts may take a sixteenth of ATLAS_DISK_MB


@dataclass
class Runtime:
    """Everything the sessions of one server share."""

    settings: Settings
    models: ModelStore
    pool: JobPool
    derived: ResultStore
    prompts: PromptStore
    janitor: Janitor
    cluster_notice: str | None = None

    @property
    def notice(self) -> str | None:
        """What the operator's cluster setting came to, when it is not working (else None)."""
        cluster = self.pool.cluster
        return cluster.notice if cluster is not None else self.cluster_notice

    @property
    def results(self) -> ResultStore:
        """Finished work (runs, reports, scores), bounded in bytes by ``ATLAS_RESULT_MB``."""
        return self.pool.results

    def stop(self) -> None:
        self.janitor.stop()
        self.pool.shutdown()


def build(settings: Settings, alive: Callable[[str], bool] = lambda _sid: True) -> Runtime:
    """A runtime for ``settings`` (not started: its janitor thread is not running)."""
    pool = JobPool(
        settings,
        ResultStore(max_entries=256, max_bytes=settings.result_bytes, alive=alive),
        KeptResults(settings.cache / "results", settings.disk_bytes // KEPT_SHARE),
    )
    pool.alive = alive
    models = ModelStore(settings.model_bytes, settings.cache)
    derived = ResultStore(max_entries=4096, max_bytes=DERIVED_MB * MIB, alive=alive)
    janitor = Janitor([models.store, pool.results, derived], settings.idle_s, busy=pool.busy)
    runtime = Runtime(
        settings, models, pool, derived, PromptStore(settings.cache / "prompts"), janitor
    )
    if settings.ray_address is not None:
        runtime.cluster_notice = join_cluster(pool, settings)
    return runtime


def join_cluster(pool: JobPool, settings: Settings) -> str | None:
    """Send the pool's work to the cluster at ``settings.ray_address`` (Ray is imported only
    here); the notice for the operator when no cluster answers, else None."""
    from ui.runtime.cluster import connect

    try:
        pool.cluster = connect(settings)
    except ClusterUnavailable as err:
        return str(err)
    return None


_lock = threading.Lock()
_current: Runtime | None = None


def start(
    alive: Callable[[str], bool] = lambda _sid: True, settings: Settings | None = None
) -> Runtime:
    """The server's runtime, created and started on the first call (settings from the
    environment unless given); later calls return the same one."""
    global _current
    with _lock:
        if _current is None:
            keep_freed_blocks()  # passes reuse freed memory instead of faulting it in again
            _current = build(settings or Settings.from_env(), alive)
            _current.janitor.start()
        return _current


def current() -> Runtime:
    """The running runtime (started with the environment's settings if nothing started it)."""
    return _current or start()


def restart(settings: Settings, alive: Callable[[str], bool] = lambda _sid: True) -> Runtime:
    """Replace the runtime with a fresh one for ``settings`` (tests; an operator's reload)."""
    global _current
    with _lock:
        if _current is not None:
            _current.stop()
        _current = build(settings, alive)
        _current.janitor.start()
        return _current
