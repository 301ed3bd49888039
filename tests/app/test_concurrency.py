"""Eight sessions at once on one cached model: each sees exactly its own patterns."""

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from models.capture import capture
from tests.app_helpers import open_app

PROMPTS = [f"Session {i} asks: " + " ".join(["alpha", "beta", "gamma", "delta"][: i % 4 + 1]) * (i + 1)
           for i in range(8)]


def no_live_hooks(model) -> bool:
    return all(not hp._forward_hooks and not hp._backward_hooks
               for hp in model.bridge.hook_dict.values())


def test_parallel_captures_equal_solo_captures(bundled):
    solo = {prompt: capture(bundled, prompt).patterns for prompt in PROMPTS}
    with ThreadPoolExecutor(max_workers=8) as pool:
        runs = list(pool.map(lambda p: capture(bundled, p), PROMPTS * 3))
    for run in runs:
        np.testing.assert_array_equal(run.patterns, solo[run.prompt])
    assert no_live_hooks(bundled)


def heatmap_z(at) -> np.ndarray:
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    return np.array(spec["data"][0]["z"], dtype=float)


def test_eight_app_sessions_at_once(bundled):
    def session(i: int):
        at = open_app(model="bundled", prompt=PROMPTS[i], layer=i % 3, head=i % 6)
        return i, at

    with ThreadPoolExecutor(max_workers=8) as pool:
        sessions = list(pool.map(session, range(8)))
    for i, at in sessions:
        assert not at.exception, at.exception
        expected = capture(bundled, PROMPTS[i]).pattern(i % 3, i % 6)
        shown = heatmap_z(at)
        causal = np.tril(np.ones_like(expected, dtype=bool))
        np.testing.assert_allclose(shown[causal], expected[causal], atol=1e-6)
        assert np.isnan(shown[~causal]).all()
    import app_state  # the model the sessions shared, from the app's own resource cache
    from models.spec import ModelSpec

    assert no_live_hooks(app_state.get_model(ModelSpec("bundled")))
