"""Nothing a visitor does reaches Streamlit's exception box: a failure the page did not expect
is logged with its traceback for the operator and shown as one line; a refusal meant for the
visitor (a job over the operator's limits) is its message, with what would fit."""

from __future__ import annotations

import logging
import re
import time

import pytest

from models.circuits.cost import baseline_cost, edges_cost
from models.errors import UserError
from models.model.spec import ModelSpec
from tests.app.helpers import open_app, texts
from ui import session
from ui.keys import Circuits
from ui.runtime import server
from ui.runtime.policy import admit
from ui.runtime.settings import Settings
from ui.sections import circuits_atp, explorer, explorer_results
from ui.state import circuits as cs


def boom(*_args, **_kwargs):
    raise RuntimeError("boom: a bug, with /srv/secret/path in its text")


@pytest.mark.parametrize(
    ("module", "name"),
    [(explorer, "intro"), (explorer_results, "thumbnails"), (explorer, "sink_hint")],
    ids=["page", "fragment", "page after the run"],
)
def test_an_unexpected_failure_is_logged_and_shown_as_one_line(monkeypatch, caplog, module, name):
    monkeypatch.setattr(module, name, boom)
    with caplog.at_level(logging.ERROR, logger=session.__name__):
        at = open_app(model="bundled", prompt="the cat sat on the mat")
    assert not at.exception
    assert [e.value for e in at.error] == [session.UNEXPECTED]
    assert "/srv/secret" not in texts(at) and "boom" not in texts(at)
    logged = [r for r in caplog.records if r.exc_info and "boom" in str(r.exc_info[1])]
    assert logged, caplog.text  # the operator's log has the traceback
    assert logged[0].exc_info[2] is not None


def test_a_message_meant_for_the_visitor_that_escapes_is_shown_as_it_is(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise UserError("This view needs a smaller prompt.")

    monkeypatch.setattr(explorer, "intro", refuse)
    at = open_app(model="bundled", prompt="the cat sat on the mat")
    assert not at.exception and [e.value for e in at.error] == [
        "This view needs a smaller prompt\\."
    ]


@pytest.mark.slow
def test_attribution_patching_of_a_4000_character_prompt_says_what_fits(monkeypatch):
    """SmolLM2, clean and corrupted prompts of about 4,000 characters (1,053 tokens): AtP with
    the QK fix would need about 11 GB, over the 4 GiB one job may use. The tab says so, and how
    many tokens would fit, instead of showing the exception box, and before it is asked for:
    no button offers work the server would refuse (every run counts as slow here, so the tab
    waits to be asked)."""
    monkeypatch.setattr(cs, "AUTO_S", 0.0)
    at = open_app(model="smollm2")
    at.switch_page("pages/circuits.py").run()
    words = ("the cat sat on the mat and " * 200)[:4000]
    state = at.session_state[Circuits.STATE]
    state = cs.edit_task(
        state, "clean", words + " When Mary and John went to the store, John gave a drink to"
    )
    state = cs.edit_task(
        state, "corrupted", words + " When Mary and John went to the store, Mary gave a drink to"
    )
    at.session_state[Circuits.STATE] = cs.choose_tab(state, "atp")
    at.run()
    for _ in range(60):  # the clean and corrupted runs go first, as a job
        if not any("Waiting for the clean" in i.value for i in at.info):
            break
        time.sleep(5)
        at.run()
    assert not at.exception
    said = next(e.value for e in at.error if "would need about" in e.value)
    assert said.startswith("Attribution patching of every head would need about")
    fits = int(re.search(r"At most ([\d,]+) tokens", said).group(1).replace(",", ""))
    model = server.current().models.get(admit(ModelSpec("smollm2"), Settings()))
    edges_s = edges_cost(model, fits, True, "recomputed").seconds
    options = cs.atp_options(at.session_state[Circuits.STATE], edges_s)
    limit = server.current().settings.job_bytes
    assert circuits_atp.total_cost(model, fits, options).peak_bytes <= limit
    assert circuits_atp.total_cost(model, fits + 1, options).peak_bytes > limit
    assert 100 < fits < 1053
    assert not [b for b in at.button if b.label.startswith("Estimate every head")]


def test_the_clean_and_corrupted_runs_over_the_job_limit_say_what_fits(monkeypatch):
    """The Circuits page's first job is priced like every job: with one job limited to 8 MiB,
    the bundled model's preset task (about 10 MB of copies in one pass) is refused, and the
    refusal says how many tokens would fit."""
    monkeypatch.setenv("ATLAS_JOB_MB", "8")
    at = open_app(model="bundled")
    at.switch_page("pages/circuits.py").run()
    assert not at.exception
    said = next(e.value for e in at.error if "fit this server" in e.value)
    fits = int(re.search(r"At most ([\d,]+) tokens", said).group(1).replace(",", ""))
    model = server.current().models.get(admit(ModelSpec("bundled"), Settings()))
    limit = server.current().settings.job_bytes
    assert baseline_cost(model, fits).peak_bytes <= limit
    assert baseline_cost(model, fits + 1).peak_bytes > limit
