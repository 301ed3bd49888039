"""The Ray cluster engine (``ATLAS_RAY_ADDRESS``): off by default without importing Ray, and,
in a network namespace of its own with only loopback, the checks of ``cluster_checks.py``
against a local head of two CPUs."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from models.model.spec import ModelSpec
from tests.app.helpers import open_app, shown
from ui.keys import Session
from ui.runtime import server
from ui.runtime.job_keys import RunKey
from ui.runtime.jobs import ClusterUnavailable, JobPool, WorkerLost
from ui.runtime.models import ModelStore
from ui.runtime.policy import admit
from ui.runtime.settings import Settings
from ui.runtime.store import ResultStore

ROOT = Path(__file__).resolve().parents[2]
CHECKS = Path(__file__).with_name("cluster_checks.py")


def test_without_an_address_a_job_runs_here_and_nothing_imports_ray(bundled):
    from models.capture.run import capture

    settings = Settings()
    assert settings.ray_address is None
    pool = JobPool(settings, ResultStore())
    allowed = admit(ModelSpec("bundled"), settings)
    model = ModelStore(settings.model_bytes, settings.cache).get(allowed)
    key = RunKey(allowed, "one two three one two three", None)
    try:
        job = pool.submit(key, "capture", lambda p: capture(model, key.prompt, progress=p))
        run = job.future.result(timeout=120)
    finally:
        pool.shutdown()
    assert pool.cluster is None
    np.testing.assert_allclose(run.pattern(1, 0).sum(-1), 1.0, atol=1e-5)  # softmax rows
    assert "ray" not in sys.modules


def test_an_address_is_read_only_when_it_is_host_and_port():
    assert Settings.from_env({"ATLAS_RAY_ADDRESS": "10.0.0.5:6379"}).ray_address == "10.0.0.5:6379"
    assert Settings.from_env({"ATLAS_RAY_ADDRESS": "ray://head:10001"}).ray_address
    assert Settings.from_env({"ATLAS_RAY_ADDRESS": "head; rm -rf /"}).ray_address is None
    assert Settings.from_env({"ATLAS_RAY_GPUS": "0.25"}).ray_gpus == 0.25


class FlakyCluster:
    """A cluster whose worker dies on the first job, then stops answering."""

    notice = None

    def __init__(self) -> None:
        self.calls = 0

    def runs(self, key) -> bool:
        return isinstance(key, RunKey)

    def lookup(self, key):
        return None

    def run(self, key, report, partial=None):
        self.calls += 1
        if self.calls == 1:
            raise WorkerLost("The worker computing this stopped before it finished. Press Retry.")
        raise ClusterUnavailable("no answer")


def test_a_lost_worker_shows_one_line_and_retry_draws_the_view(bundled):
    flaky = FlakyCluster()
    server.restart(Settings.from_env()).pool.cluster = flaky
    try:
        at = open_app(model="bundled")
        assert not at.exception
        said = [shown(e.value) for e in at.error]
        assert said == ["The worker computing this stopped before it finished. Press Retry."]
        next(b for b in at.button if b.label == "Retry").click().run()
        assert not at.exception and not at.error and flaky.calls == 2
        key = at.session_state[Session.LAST_RUN]  # read here once the cluster did not answer
        assert server.current().results.get(key).n_tokens > 0
    finally:
        server.restart(Settings.from_env())


def namespace_unavailable() -> str | None:
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed (requirements-dev.txt)"
    if os.geteuid() != 0:
        return "a network namespace needs root (CI runs as root)"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare or ip is not installed"
    return None


@pytest.mark.ray
@pytest.mark.skipif(namespace_unavailable() is not None, reason=str(namespace_unavailable()))
@pytest.mark.slow
def test_the_cluster_checks_pass_on_a_local_head_with_only_loopback():
    # Ray records the host's own interface address even when told 127.0.0.1; in a network
    # namespace with only loopback every address is 127.0.0.1. A PID namespace of its own ends
    # every process the head started when the checks end.
    inner = f"ip link set lo up && exec {sys.executable} -m pytest -q -p no:cacheprovider {CHECKS}"
    env = {**os.environ, "ATLAS_TEST_NETNS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("ATLAS_RAY_ADDRESS", None)
    done = subprocess.run(
        ["unshare", "--net", "--pid", "--fork", "--mount-proc", "sh", "-c", inner],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-3000:]
