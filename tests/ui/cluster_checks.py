"""Checks run by ``test_cluster.py`` inside a network namespace with only loopback: a local Ray
head with two CPUs, and the real app pointed at it with ``ATLAS_RAY_ADDRESS``."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("ATLAS_TEST_NETNS") != "1":
    pytest.skip("runs inside test_cluster.py's network namespace", allow_module_level=True)

import ray
from ray.util.state import list_tasks

from models.capture.run import capture
from models.circuits import baseline, copying_task, head_effects, prepare
from models.model.spec import ModelSpec
from models.progress import Cancelled
from tests.app.helpers import open_app, shown
from tests.ui.cluster_work import StepsKey
from ui.keys import Session
from ui.runtime import server
from ui.runtime.cluster import worker_name
from ui.runtime.jobs import Partial, WorkerLost
from ui.runtime.policy import admit
from ui.runtime.settings import Settings

PORT, DASHBOARD = 6391, 8266
DASHBOARD_URL = f"http://127.0.0.1:{DASHBOARD}"
RAY = str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="module", autouse=True)
def head():
    temp = tempfile.mkdtemp(prefix="ray")
    subprocess.run(
        [RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={PORT}",
         "--num-cpus=2", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
         f"--dashboard-port={DASHBOARD}", "--disable-usage-stats", f"--temp-dir={temp}"],
        check=True, capture_output=True, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip
    os.environ["ATLAS_RAY_ADDRESS"] = f"127.0.0.1:{PORT}"
    server.restart(Settings.from_env())
    yield
    del os.environ["ATLAS_RAY_ADDRESS"]
    server.restart(Settings.from_env())
    ray.shutdown()  # the head's processes end with test_cluster.py's PID namespace


def worker():
    """The bundled model's worker: the named actor every front end finds."""
    allowed = admit(ModelSpec("bundled"), server.current().settings)
    server.current().pool.cluster.worker(allowed)  # created by the first to ask
    return ray.get_actor(worker_name(allowed), namespace="attention-atlas")


def runs_on_workers() -> list:
    return list_tasks(address=DASHBOARD_URL, filters=[("name", "=", "ModelWorker.run")])


def wait_for(done, what: str, limit_s: float = 120.0) -> None:
    end = time.monotonic() + limit_s
    while not done():
        assert time.monotonic() < end, what
        time.sleep(0.05)


def test_capture_and_patching_run_in_a_worker_and_equal_the_pools(bundled):
    assert server.current().pool.cluster is not None, server.current().notice
    at = open_app(model="bundled")
    assert not at.exception
    key = at.session_state[Session.LAST_RUN]
    run = server.current().results.get(key)
    here = capture(bundled, key.prompt, max_tokens=key.max_tokens)
    assert run.n_tokens == here.n_tokens
    for layer in range(bundled.facts.n_layers):
        np.testing.assert_allclose(run.layer_patterns(layer), here.layer_patterns(layer), atol=1e-6)

    at = open_app("pages/circuits.py", model="bundled")
    assert not at.exception
    table = at.dataframe[0].value
    setup = prepare(bundled, copying_task(bundled))
    expected = head_effects(bundled, setup, baseline(bundled, setup))
    got = table.sort_values(["layer", "head"])["patch_effect"].to_numpy()
    np.testing.assert_allclose(got, expected.ravel(), atol=1e-5)

    info = ray.get(worker().info.remote())
    assert info["pid"] != os.getpid() and info["loads"] == 1
    # Ray's state API catches up with a task's end a moment after ray.get has returned
    wait_for(
        lambda: len(runs := runs_on_workers()) >= 3 and {t.state for t in runs} == {"FINISHED"},
        "the state API lists the worker's jobs, each finished",
    )


def test_a_second_front_end_finds_the_result_and_the_loaded_model():
    first = open_app(model="bundled").session_state[Session.LAST_RUN]
    before = ray.get(worker().info.remote())
    server.restart(Settings.from_env())  # another front end: its own pool, stores and link
    assert len(server.current().results) == 0
    at = open_app(model="bundled")
    assert not at.exception and at.session_state[Session.LAST_RUN] == first
    assert server.current().results.get(first) is not None
    after = ray.get(worker().info.remote())
    assert after["computed"] == before["computed"] and after["loads"] == 1  # found, not again


def steps_job(steps: int):
    pool = server.current().pool
    allowed = admit(ModelSpec("bundled"), server.current().settings)
    return pool, pool.submit(StepsKey(allowed, steps), f"{steps} steps", None, waiter="visitor")


def test_cancel_stops_the_workers_job():
    pool, job = steps_job(400)  # 20 s of steps
    wait_for(lambda: job.fraction > 0, "the job reports progress from the worker")
    pool.cancel(job, "visitor")
    with pytest.raises(Cancelled):
        job.future.result(timeout=60)

    def stopped() -> bool:
        info = ray.get(worker().info.remote())
        return info["running"] == 0 and info["stopped"] == 1

    wait_for(stopped, "the worker's job stopped by its flag, long before its 400 steps", 10)


def test_what_a_job_streams_reaches_the_front_end():
    pool = server.current().pool
    allowed = admit(ModelSpec("bundled"), server.current().settings)
    partial = Partial()
    job = pool.submit(StepsKey(allowed, 41), "41 steps", None, waiter="visitor", partial=partial)
    wait_for(lambda: partial.text.startswith("step "), "the worker's text so far arrives here")
    assert job.future.result(timeout=60) == 41


def test_a_killed_worker_is_restarted_and_the_retry_succeeds():
    pid = ray.get(worker().info.remote())["pid"]
    _, job = steps_job(400)
    wait_for(lambda: job.fraction > 0, "the job runs on the worker")
    ray.kill(worker(), no_restart=False)
    with pytest.raises(WorkerLost, match="Press Retry"):
        job.future.result(timeout=60)
    _, again = steps_job(3)
    assert again.future.result(timeout=120) == 3
    assert ray.get(worker().info.remote())["pid"] != pid


def test_a_missing_cluster_leaves_the_work_here_with_a_notice(monkeypatch):
    monkeypatch.setenv("ATLAS_RAY_ADDRESS", f"127.0.0.1:{PORT + 9}")  # nothing listens there
    at = open_app(model="bundled")
    assert not at.exception and server.current().pool.cluster is None
    said = shown(at.sidebar.warning[0].value)
    assert f"No Ray cluster answered at 127.0.0.1:{PORT + 9}" in said
    key = at.session_state[Session.LAST_RUN]
    assert server.current().results.get(key).n_tokens > 0  # the view was read here
