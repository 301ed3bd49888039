"""The per-head table (the page's and the command line's), its CSV and the prune list."""

import io
import json

import numpy as np
import pandas as pd
import pytest

from models.heads.finding.corpus_scores import CorpusScores, text_scores
from models.heads.finding.induction import RepeatedScores
from models.heads.finding.spread import spread
from models.heads.names import (
    ABLATION_COLUMNS,
    COLUMN_LABELS,
    CORE_COLUMNS,
    EXTRA_COLUMNS,
    TEXT_SCORES,
)
from models.heads.pruning.ablation import pruning_order
from models.heads.pruning.importance import CorpusImportance
from models.heads.table import (
    VARIANT_SCORES,
    Thresholds,
    cli_table,
    corpus_flag_grids,
    corpus_prune_list,
    corpus_table,
    prune_list_json,
    spreadsheet_safe,
    table_csv,
)

N_LAYERS, N_HEADS, N = 2, 3, 6
IDS = [0, 4, 5, 4, 5, 9]


def fake_scores(n_texts: int = 1, tokens: str = "abcdef") -> CorpusScores:
    rng = np.random.default_rng(0)
    per_text = []
    for _ in range(n_texts):
        raw = rng.random((N_LAYERS, N_HEADS, N, N)) * np.tril(np.ones((N, N)))
        patterns = raw / raw.sum(-1, keepdims=True)
        patterns[1, 2] = 0.0
        patterns[1, 2, :, 0] = 1.0  # a perfect sink head: 1.2
        per_text.append(text_scores(patterns, IDS, causal=True))
    return CorpusScores(
        spreads={name: spread(np.stack([p[name] for p in per_text])) for name in TEXT_SCORES},
        examples={},
        tokens=(tuple(tokens),) * n_texts,
        n_cut=0,
        top_sink_pos=np.stack([p["top_sink_pos"] for p in per_text]),
    )


def fake_repeated(per_sequence: np.ndarray | None = None) -> RepeatedScores:
    grid = np.arange(N_LAYERS * N_HEADS, dtype=float).reshape(N_LAYERS, N_HEADS) / 10
    return RepeatedScores(
        induction=grid,
        previous_token=grid,
        duplicate_token=grid,
        current_token=grid,
        seq_len=5,
        batch=2,
        seed=0,
        n_vocab_drawn=9,
        induction_per_sequence=per_sequence,
    )


def fake_importance() -> CorpusImportance:
    zero = np.array([[0.5, -0.1, 0.2], [np.nan, 0.0, 1.0]])
    return CorpusImportance(
        spreads={
            "zero": spread(zero[None]),
            "mean": spread(zero[None]),
            "gradient": spread(np.abs(zero)[None]),
            "first_order": spread(zero[None]),
        },
        base_losses=np.array([2.0]),
        means=None,
        kind="next_token",
        n_targets=10,
    )


def test_command_line_columns_and_values():
    repeated, scores = fake_repeated(), fake_scores()
    table = cli_table(repeated, scores, Thresholds(), None, ablation=False, extras=False)
    assert list(table.columns) == CORE_COLUMNS
    assert list(zip(table["layer"], table["head"], strict=True)) == [
        (layer, head) for layer in range(2) for head in range(3)
    ]
    np.testing.assert_allclose(table["induction"], repeated.induction.ravel())
    np.testing.assert_allclose(table["sink"], scores.spreads["sink"].per_text[0].ravel())
    assert table["sink_flag"].tolist() == (table["sink"] > 0.3).tolist()
    assert table["sink_flag"].iloc[5] and table["sink"].iloc[5] == 1.0


def test_extras_and_flags_follow_thresholds():
    table = cli_table(
        fake_repeated(),
        fake_scores(),
        Thresholds(induction=0.25),
        None,
        ablation=False,
        extras=True,
    )
    assert list(table.columns) == CORE_COLUMNS + EXTRA_COLUMNS
    assert table.loc[5, "L.H"] == "1.2"
    induction, sink = COLUMN_LABELS["induction"], COLUMN_LABELS["sink"]
    assert induction in table.loc[3, "flags"] and induction not in table.loc[2, "flags"]
    assert sink in table.loc[5, "flags"]
    assert table.loc[5, "top_sink_pos"] == 0 and table.loc[5, "top_sink_token"] == "a"
    assert table.loc[5, "top_sink_alpha"] == 1.0


def test_flags_are_judged_on_the_lower_bound():
    # induction 0.5 on average, but 0.1 and 0.9 on the two sequences: mean - 2 SE < 0.4
    per_sequence = np.stack([np.full((N_LAYERS, N_HEADS), 0.1), np.full((N_LAYERS, N_HEADS), 0.9)])
    steady = np.stack([np.full((N_LAYERS, N_HEADS), 0.5)] * 2)
    flags = corpus_flag_grids(fake_repeated(per_sequence), fake_scores(), Thresholds())
    assert not flags["induction"].any()
    assert corpus_flag_grids(fake_repeated(steady), fake_scores(), Thresholds())["induction"].all()


def test_page_table_has_every_spread_column():
    table = corpus_table(fake_repeated(), fake_scores(n_texts=3), Thresholds(), fake_importance())
    plain = [name for name in TEXT_SCORES if name not in VARIANT_SCORES]
    for base in ("induction", *plain, "zero_ablation_dloss", "first_order_dloss"):
        for suffix in ("", "_se", "_min", "_max", "_lower", "_spread"):
            assert base + suffix in table, base + suffix
    assert not any(column.startswith(VARIANT_SCORES) for column in table)  # no head has them
    assert table.loc[0, "induction_spread"] == "one text"
    assert table.loc[0, "previous_token_spread"].startswith("± 0.")
    assert set(table.columns) <= set(COLUMN_LABELS) | {"open"}


def test_corpus_csv_has_entropy_and_distance_with_standard_errors():
    scores = fake_scores(n_texts=3)
    table = pd.read_csv(io.StringIO(table_csv(corpus_table(fake_repeated(), scores, Thresholds()))))
    for name in ("entropy", "distance"):
        per = scores.spreads[name].per_text  # text layer head
        np.testing.assert_allclose(table[name], per.mean(0).ravel(), rtol=1e-7)
        want_se = per.std(0, ddof=1).ravel() / np.sqrt(3)
        np.testing.assert_allclose(table[f"{name}_se"], want_se, rtol=1e-7)
    # the perfect sink head 1.2 puts every row on key 0: entropy 0, distance (1 + .. + 5) / 5
    assert table.loc[5, "entropy"] == 0.0 and table.loc[5, "distance"] == pytest.approx(3.0)


def test_csv_round_trips_and_guards_formulas():
    table = cli_table(
        fake_repeated(),
        fake_scores(tokens="=+-@ab"),
        Thresholds(),
        None,
        ablation=False,
        extras=True,
    )
    back = pd.read_csv(io.StringIO(table_csv(table)))
    np.testing.assert_allclose(back["sink"], table["sink"], rtol=1e-7)
    assert back["top_sink_token"].iloc[5] == "'="
    assert spreadsheet_safe("@x") == "'@x" and spreadsheet_safe("ok") == "ok"


def test_ablation_columns_empty_without_importance_and_filled_with_it():
    repeated, scores = fake_repeated(), fake_scores()
    empty = cli_table(repeated, scores, Thresholds(), None, ablation=True, extras=False)
    assert list(empty.columns) == CORE_COLUMNS + ABLATION_COLUMNS
    assert empty[ABLATION_COLUMNS].isna().all().all()
    full = cli_table(repeated, scores, Thresholds(), fake_importance(), ablation=True, extras=False)
    np.testing.assert_allclose(full["grad_importance"], np.abs(fake_importance().zero).ravel())


def test_prune_list_ranks_every_head_and_reports_the_curve():
    imp = fake_importance()
    order = pruning_order(imp.zero)
    ks, losses = [0, 1, 2, 6], [2.0, 1.9, 2.0, float("nan")]
    plan = json.loads(
        prune_list_json(corpus_prune_list(imp, "zero", "zero", order, ks, losses, "m", "x"))
    )
    assert plan["clean_loss"] == 2.0 and plan["ranked_by"] == "zero_ablation_dloss"
    assert [s["head"] for s in plan["order"]][:2] == ["0.1", "1.1"]
    assert plan["order"][2] == {
        "rank": 3,
        "head": "0.2",
        "layer": 0,
        "head_index": 2,
        "importance": 0.2,
        "standard_error": None,
    }
    assert plan["order"][-1]["importance"] is None
    assert plan["curve"][1] == {"k": 1, "loss": pytest.approx(1.9)}
    assert plan["curve"][-1]["loss"] is None
