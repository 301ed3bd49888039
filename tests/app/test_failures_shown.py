"""Nothing a visitor does reaches Streamlit's exception box: a failure the page did not expect
is logged with its traceback for the operator and shown as one line."""

from __future__ import annotations

import logging

import pytest

from models.errors import UserError
from tests.app.helpers import open_app, texts
from ui import session
from ui.sections import explorer, explorer_results


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
