"""Long prompts kept for links: one visitor's share holds however many sessions it opens, so a
flood of long prompts from fresh sessions cannot expire another visitor's link."""

from __future__ import annotations

from types import SimpleNamespace

from ui.runtime.prompt_store import PromptStore
from ui.widgets import job_view


def test_fresh_sessions_of_one_visitor_share_one_bound(tmp_path):
    store = PromptStore(tmp_path, max_files=20, share=5)
    victim = store.save("the victim's long prompt", "client:10.0.0.2")
    for i in range(100):  # every prompt from a new session, the same client
        store.save(f"flood {i}", "client:10.0.0.1")
    assert store.load(victim) == "the victim's long prompt"
    assert len(list(tmp_path.glob("*.txt"))) == 1 + 5
    assert store.load(store.save("flood 99", "client:10.0.0.1")) == "flood 99"


def test_the_visitor_is_the_client_address_and_loopback_is_one_visitor(monkeypatch):
    def context(ip, headers):
        return SimpleNamespace(context=SimpleNamespace(ip_address=ip, headers=headers))

    monkeypatch.setattr(job_view, "session_id", lambda: "session-1")
    monkeypatch.setattr(job_view, "st", context("10.0.0.7", {"Host": "x"}))
    assert job_view.visitor_id() == "client:10.0.0.7"
    monkeypatch.setattr(job_view, "st", context(None, {"Host": "localhost"}))
    assert job_view.visitor_id() == "client:local"
    monkeypatch.setattr(job_view, "st", context(None, {}))  # no client: a script run
    assert job_view.visitor_id() == "session-1"
