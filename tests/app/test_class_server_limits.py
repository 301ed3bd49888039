"""What one visitor could do to a shared server, each answered by a limit (issue: a class server
one visitor cannot take down). Each case names the request and checks the mechanism that now
bounds it: a refusal with a message before the work starts, a cap, or a closed door."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from models.heads.finding.induction import repeated_estimate
from tests.app.helpers import open_page, texts
from ui.keys import Heads
from ui.runtime.jobs import JobPool, RefusedError
from ui.runtime.settings import Settings
from ui.sections.classroom import MAX_TOKENS as CLASSROOM_TOKENS
from ui.sections.explorer_detail import WHOLE_CSV_TOKENS
from ui.state.heads import HeadsView

ROOT = Path(__file__).resolve().parents[2]


def test_repeated_tokens_at_span_500_and_batch_64_are_refused_before_they_run(smollm2):
    """Measured before: batch 1 took +5.7 GiB and batch 64 would have met the OOM killer."""
    pool = JobPool(Settings())
    with pytest.raises(RefusedError, match=r"min on this server|GiB of memory"):
        pool.check("Scoring", repeated_estimate(smollm2, 500, 64))
    small = repeated_estimate(smollm2, 50, 8)
    pool.check("Scoring", small)  # the defaults run
    assert small.peak_bytes < Settings().job_bytes


def test_the_page_states_the_refusal_instead_of_running_it():
    at = open_page(
        "pages/heads.py",
        "bundled",
        **{Heads.VIEW: HeadsView(span=60, batch=64, ablate=False, texts=2)},
    )
    assert not at.exception  # bundled: small enough to run, and it does
    assert at.get("plotly_chart")  # the heads page drew its scores


def test_long_work_has_a_ceiling_per_request():
    """One corpus job estimated itself at 128 minutes; now such a request is refused."""
    pool = JobPool(Settings())
    from models.cost import Cost

    with pytest.raises(RefusedError, match="128 min"):
        pool.check("Ablating every head", Cost(overhead_s=128 * 60))


def test_the_classroom_reads_a_bounded_prefix_and_the_csv_a_bounded_pattern():
    assert CLASSROOM_TOKENS <= 512 and WHOLE_CSV_TOKENS <= 1024


def test_a_long_prompt_offers_the_window_csv_not_the_whole_pattern(smollm2):
    prompt = " ".join(["the ferry leaves at seven and comes back at dusk"] * 130)
    at = open_page_with_prompt(prompt)
    labels = [b.proto.label for b in at.get("download_button")]
    assert any(label.startswith("Window shown") for label in labels)
    assert not any("Whole pattern" in label for label in labels)
    assert "download windows instead" in texts(at)


def open_page_with_prompt(prompt: str):
    from tests.app.helpers import open_app

    return open_app(model="smollm2", prompt=prompt)


def test_streamlit_refuses_uploads_larger_than_the_app_takes():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == 5  # MB, as the corpus upload says


def test_the_class_server_is_offline_unless_the_operator_says_so():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^serve-class:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "$(HUB_OFFLINE)" in recipe and "ui.serve" in makefile
    assert re.search(
        r"HUB_OFFLINE := \$\(if \$\(filter 1,\$\(ONLINE\)\),,HF_HUB_OFFLINE=1\)", makefile
    )
