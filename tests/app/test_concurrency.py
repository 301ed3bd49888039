"""Eight forward passes at once on one shared model: each gets exactly its own patterns.

(Eight browser sessions at once are in tests/e2e/test_sessions.py: AppTest is not thread-safe.)
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from models.capture.run import capture

PROMPTS = [
    f"Session {i} asks: " + " ".join(["alpha", "beta", "gamma", "delta"][: i % 4 + 1]) * (i + 1)
    for i in range(8)
]


def no_live_hooks(model) -> bool:
    return all(
        not hp._forward_hooks and not hp._backward_hooks for hp in model.bridge.hook_dict.values()
    )


def test_parallel_captures_equal_solo_captures(bundled):
    solo = {prompt: capture(bundled, prompt).patterns for prompt in PROMPTS}
    with ThreadPoolExecutor(max_workers=8) as pool:
        runs = list(pool.map(lambda p: capture(bundled, p), PROMPTS * 3))
    for run in runs:
        np.testing.assert_array_equal(run.patterns, solo[run.prompt])
    assert no_live_hooks(bundled)
