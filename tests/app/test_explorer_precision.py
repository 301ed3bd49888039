"""The explorer states the dtype a run used and, below float32, its measured pattern difference
from float32 (recomputed here from the same run and model)."""

from models.capture.precision import pattern_difference
from tests.app.helpers import open_app, texts
from ui.keys import Session, Sidebar
from ui.runtime import server
from ui.runtime.job_keys import PrecisionKey

PROMPT = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))"


def test_float32_run_states_its_dtype_and_no_difference():
    at = open_app(model="bundled", prompt=PROMPT)
    said = texts(at)
    assert "tokens · float32" in said
    assert "largest pattern difference" not in said


def test_bfloat16_run_states_the_measured_difference():
    at = open_app(model="bundled", prompt=PROMPT)
    at.selectbox(key=Sidebar.DTYPE).set_value("bfloat16").run()
    assert not at.exception, at.exception
    key = at.session_state[Session.LAST_RUN]
    assert key.spec.spec.dtype == "bfloat16"
    runtime = server.current()
    if "Measuring how far bfloat16 lies from float32" in texts(at):  # the view did not wait
        job = runtime.pool.get(PrecisionKey(key))
        if job is not None:  # still running (else it has finished since)
            job.future.result(timeout=600)
        at.run()  # the browser's waiting line asks for this run once the work has finished
    run, model = runtime.results.get(key), runtime.models.get(key.spec)
    assert run.dtype == "bfloat16"
    expected = pattern_difference(model, run)
    assert expected is not None and expected.n_rows == run.n_tokens  # a short prompt: every row
    assert 0 < expected.largest < 0.1  # bfloat16 arithmetic moves the patterns, a little
    layer, head, query, where = expected.where
    said = texts(at)
    assert "tokens · bfloat16" in said
    assert (
        "Run in bfloat16: largest pattern difference from float32 arithmetic on the same "
        f"weights: {expected.largest:.2g} (head {layer}.{head}, query {query}, key {where}; "
        f"first {expected.n_rows:,} rows)."
    ) in said
