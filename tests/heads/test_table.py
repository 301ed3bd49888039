"""The per-head table, its CSV, the prune list and the store of finished work."""

import io
import json

import numpy as np
import pandas as pd
import pytest
import torch

from models.heads.ablation import Importance, pruning_order
from models.heads.induction import RepeatedScores
from models.heads.scores import prompt_scores
from models.heads.store import ResultStore
from models.heads.table import (ABLATION_COLUMNS, CORE_COLUMNS, Thresholds, flag_grids,
                                head_table, prune_list, prune_list_json, table_csv)

N_LAYERS, N_HEADS, N = 2, 3, 6


def fake_scores():
    rng = np.random.default_rng(0)
    raw = rng.random((N_LAYERS, N_HEADS, N, N)) * np.tril(np.ones((N, N)))
    patterns = raw / raw.sum(-1, keepdims=True)
    patterns[1, 2] = 0.0
    patterns[1, 2, :, 0] = 1.0  # a perfect sink head: 1.2
    prompt = prompt_scores(patterns, [0, 4, 5, 4, 5, 9], causal=True)
    grid = np.arange(N_LAYERS * N_HEADS, dtype=float).reshape(N_LAYERS, N_HEADS) / 10
    repeated = RepeatedScores(induction=grid, previous_token=grid, duplicate_token=grid,
                              current_token=grid, seq_len=5, batch=2, seed=0, n_vocab_drawn=9)
    return repeated, prompt


def test_core_columns_and_values():
    repeated, prompt = fake_scores()
    table = head_table(repeated, prompt)
    assert list(table.columns) == CORE_COLUMNS
    assert list(zip(table["layer"], table["head"])) == [(l, h) for l in range(2) for h in range(3)]
    np.testing.assert_allclose(table["induction"], repeated.induction.ravel())
    np.testing.assert_allclose(table["sink"], prompt.sink.ravel())
    assert table["sink_flag"].tolist() == (prompt.sink.ravel() > 0.3).tolist()
    assert table["sink_flag"].iloc[5] and table["sink"].iloc[5] == 1.0


def test_extras_and_flags_follow_thresholds():
    repeated, prompt = fake_scores()
    table = head_table(repeated, prompt, Thresholds(induction=0.25), tokens=list("abcdef"),
                       extras=True, source="repeated")
    assert table.loc[5, "L.H"] == "1.2"
    assert "induction" in table.loc[3, "flags"] and "induction" not in table.loc[2, "flags"]
    assert "sink" in table.loc[5, "flags"]
    assert table.loc[5, "top_sink_token"] == "a" and table.loc[5, "top_sink_alpha"] == 1.0
    flags = flag_grids(repeated, prompt, Thresholds(previous_token=0.45), "repeated")
    assert flags["previous_token"].sum() == 1  # only 1.2 (0.5) is above 0.45


def test_csv_round_trips_and_guards_formulas():
    repeated, prompt = fake_scores()
    table = head_table(repeated, prompt, tokens=["=cmd()"] * N, extras=True)
    back = pd.read_csv(io.StringIO(table_csv(table)))
    np.testing.assert_allclose(back["sink"], table["sink"], rtol=1e-7)
    assert back["top_sink_token"].iloc[0] == "'=cmd()"


def fake_importance():
    zero = np.array([[0.5, -0.1, 0.2], [np.nan, 0.0, 1.0]])
    return Importance(base_loss=2.0, zero=zero, mean=zero, gradient=np.abs(zero),
                      means=torch.zeros(2, 3, 4), kind="next_token", n_targets=10)


def test_pruning_order_least_important_first_nan_last():
    assert pruning_order(fake_importance().zero) == [(0, 1), (1, 1), (0, 2), (0, 0), (1, 2),
                                                      (1, 0)]


def test_prune_list_reports_each_k():
    imp = fake_importance()
    order = pruning_order(imp.zero)
    losses = [2.0, 1.9, 2.0, 2.3, 2.9, 4.0, float("nan")]
    plan = json.loads(prune_list_json(prune_list(imp, "zero", "zero", order, losses, "m", "x")))
    assert plan["clean_loss"] == 2.0 and len(plan["steps"]) == 6
    assert [s["head"] for s in plan["steps"]][:2] == ["0.1", "1.1"]
    assert plan["steps"][2] == {"k": 3, "head": "0.2", "layer": 0, "head_index": 2,
                                "importance": 0.2, "loss": 2.3, "dloss": pytest.approx(0.3)}
    assert plan["steps"][-1]["loss"] is None and plan["steps"][-1]["importance"] is None


def test_table_with_importance_columns():
    repeated, prompt = fake_scores()
    table = head_table(repeated, prompt, importance=fake_importance())
    assert list(table.columns) == CORE_COLUMNS + ABLATION_COLUMNS
    np.testing.assert_allclose(table["grad_importance"], np.abs(fake_importance().zero).ravel())


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
