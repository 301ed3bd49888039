"""Every ATLAS_* setting is read in one place, and the README's table lists exactly those."""

import re
from pathlib import Path

from ui.runtime.settings import Settings, readme_rows

README = Path(__file__).resolve().parents[2] / "README.md"


def test_settings_parse_and_bad_values_fall_back_to_the_default():
    s = Settings.from_env(
        {
            "ATLAS_HEAVY_JOBS": "2",
            "ATLAS_IDLE_S": "30.5",
            "ATLAS_ALLOW_REMOTE_CODE": "yes",
            "ATLAS_JOB_MB": "-5",
            "ATLAS_MAX_TOKENS": "lots",
            "ATLAS_MODEL_ROOTS": "/a:/b",
        }
    )
    assert s.heavy_jobs == 2 and s.idle_s == 30.5 and s.allow_remote_code
    assert s.job_mb == Settings().job_mb and s.max_tokens is None
    assert s.roots() == (Path("/a"), Path("/b"))
    assert Settings.from_env({}) == Settings()


def test_a_zero_wait_shows_progress_at_once_but_zero_elsewhere_is_refused():
    s = Settings.from_env({"ATLAS_JOB_WAIT_S": "0", "ATLAS_IDLE_S": "0", "ATLAS_HEAVY_JOBS": "0"})
    assert s.job_wait_s == 0.0
    assert s.idle_s == Settings().idle_s and s.heavy_jobs == Settings().heavy_jobs
    assert Settings.from_env({"ATLAS_JOB_WAIT_S": "-1"}).job_wait_s == Settings().job_wait_s


def readme_settings() -> list[tuple[str, str]]:
    rows = re.findall(r"^\| `(ATLAS_\w+)` \| ([^|]+) \|", README.read_text(encoding="utf-8"), re.M)
    return [(name, default.strip()) for name, default in rows]


def test_the_readme_lists_exactly_the_settings_and_their_defaults():
    assert readme_settings() == [(env, default) for env, default, _ in readme_rows()]
