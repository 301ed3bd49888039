"""A job kind for the cluster tests: steps that take a while and report each one (and stream
"step N" as their text so far), so a test can stop it, or kill its worker, while it runs. The
worker imports this module when it unpickles the key, which registers the kind there too."""

import time
from dataclasses import dataclass

from ui.runtime.job_work import register
from ui.runtime.policy import AllowedSpec
from ui.runtime.store import JobKey

STEP_S = 0.05


@dataclass(frozen=True)
class StepsKey(JobKey[int]):
    """``steps`` steps of :data:`STEP_S` seconds on ``spec``'s worker; the result is ``steps``."""

    spec: AllowedSpec
    steps: int


@register(StepsKey, lambda key: key.spec)
def _steps(model, key, _resolve, progress, partial):
    for step in range(key.steps):
        progress(step / key.steps, f"step {step}")
        partial.update(f"step {step}")
        time.sleep(STEP_S)
    return key.steps
