"""The store of finished work: only finished results, least recently used evicted first."""

import pytest

from models.heads.store import ResultStore


def test_store_keeps_only_finished_work():
    store = ResultStore(max_entries=2)

    def interrupted():
        raise KeyboardInterrupt("the user changed an input")

    with pytest.raises(KeyboardInterrupt):
        store.get_or_compute("a", interrupted)
    assert "a" not in store and len(store) == 0
    assert store.get_or_compute("a", lambda: 1) == 1
    assert store.get_or_compute("a", lambda: 2) == 1  # cached
    store.put("b", 2)
    store.get("a")
    store.put("c", 3)  # evicts b, the least recently used
    assert "b" not in store and store.get("a") == 1 and store.get("c") == 3
