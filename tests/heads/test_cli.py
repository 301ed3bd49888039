"""``python -m models.heads``: the table it writes (the corpus pipeline on one text), its errors
and its exit codes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.heads.__main__ import main
from models.heads.finding.corpus import sample
from models.heads.finding.corpus_scores import score_corpus
from models.heads.finding.induction import measure_repeated
from models.heads.names import ABLATION_COLUMNS, CORE_COLUMNS, EXTRA_COLUMNS
from models.heads.pruning.loss import reference_task
from models.model.forward import tokenize
from tests.heads.reference import bridge_loss, single_head_effects

ROOT = Path(__file__).resolve().parents[2]
TEXT = "When Mary and John went to the store, John gave a drink to Mary."


def test_minilm_table_matches_the_app(minilm, tmp_path, capsys):
    out = tmp_path / "minilm.csv"
    code = main(
        [
            "minilm",
            "--text",
            TEXT,
            "--seq-len",
            "20",
            "--batch",
            "2",
            "--seed",
            "3",
            "--out",
            str(out),
            "--ablation",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0 and "[heads]" in err and "not available" in err.lower()
    table = pd.read_csv(out)
    assert list(table.columns) == CORE_COLUMNS + ABLATION_COLUMNS
    assert len(table) == 6 * 12 and table[ABLATION_COLUMNS].isna().all().all()
    repeated = measure_repeated(minilm, 20, 2, 3)
    scores = score_corpus(minilm, [TEXT])
    np.testing.assert_allclose(table["induction"], repeated.induction.ravel(), rtol=1e-6)
    for name in ("previous_token", "duplicate_token", "current_token", "sink", "entropy"):
        np.testing.assert_allclose(
            table[name], scores.spreads[name].per_text[0].ravel(), rtol=1e-6, atol=1e-12
        )
    # distance is signed for an encoder: compare with an absolute bound near 0
    distance = scores.spreads["distance"].per_text[0].ravel()
    np.testing.assert_allclose(table["distance"], distance, rtol=1e-6, atol=1e-7)
    assert table["sink_flag"].tolist() == (table["sink"] > 0.3).tolist()
    # the sink on [CLS], by hand from the model's own patterns: mean over queries 1..n-1
    ids, _ = tokenize(minilm, TEXT)
    with minilm.lock:
        _, cache = minilm.bridge.run_with_cache(ids)
    first = cache["blocks.0.attn.hook_pattern"][0, :, 1:, 0].mean(-1).double().numpy()
    np.testing.assert_allclose(table["sink"][:12], first, atol=1e-6)


def test_all_columns_on_the_bundled_sample(bundled, tmp_path):
    out = tmp_path / "all.csv"
    assert (
        main(["bundled", "--seq-len", "8", "--batch", "2", "--all-columns", "--out", str(out)]) == 0
    )
    table = pd.read_csv(out, keep_default_na=False, dtype={"L.H": str})
    assert list(table.columns) == CORE_COLUMNS + EXTRA_COLUMNS
    tokens = score_corpus(bundled, sample().texts).tokens[0]
    assert table["L.H"].tolist()[:5] == ["0.0", "0.1", "0.2", "0.3", "1.0"]
    assert all(
        tokens[p] == t or t.startswith("'")
        for p, t in zip(table["top_sink_pos"], table["top_sink_token"].astype(str), strict=True)
    )


def test_bundled_ablation_columns_and_prune_list(bundled, tmp_path, capsys):
    out, plan_file = tmp_path / "bundled.csv", tmp_path / "prune.json"
    code = main(
        [
            "bundled",
            "--text",
            TEXT,
            "--seq-len",
            "10",
            "--batch",
            "2",
            "--out",
            str(out),
            "--ablation",
            "--prune-list",
            str(plan_file),
        ]
    )
    assert code == 0, capsys.readouterr().err
    table = pd.read_csv(out)
    assert list(table.columns) == CORE_COLUMNS + ABLATION_COLUMNS
    task = reference_task(bundled, TEXT)
    effects = single_head_effects(bundled, task.ids)
    np.testing.assert_allclose(table["zero_ablation_dloss"], effects.ravel(), atol=1e-5)
    plan = json.loads(plan_file.read_text())
    assert len(plan["order"]) == len(table) and plan["ranked_by"] == "zero_ablation_dloss"
    assert [c["k"] for c in plan["curve"]] == list(range(len(table) + 1))  # every k: 12 heads
    assert plan["clean_loss"] == pytest.approx(bridge_loss(bundled, task.ids), abs=1e-6)
    assert plan["curve"][0]["loss"] == pytest.approx(plan["clean_loss"], abs=1e-6)


def one_line_error(args: list[str]) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "models.heads", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    return proc.returncode, "\n".join(lines)


def test_smollm2_by_name_from_the_command_line(smollm2, tmp_path):
    out = tmp_path / "smollm2.csv"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "models.heads",
            "smollm2",
            "--seq-len",
            "20",
            "--batch",
            "2",
            "--text",
            TEXT,
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = pd.read_csv(out)
    assert len(table) == 30 * 9 and list(table.columns) == CORE_COLUMNS
    repeated = measure_repeated(smollm2, 20, 2, 0)
    np.testing.assert_allclose(table["induction"], repeated.induction.ravel(), rtol=1e-5)


def test_prune_and_export_from_the_command_line(bundled, tmp_path, capsys):
    from models.heads.finding.corpus import read_corpus_file
    from models.heads.pruning.ablation import pruning_order
    from models.heads.pruning.importance import corpus_losses, measure_corpus_importance
    from models.heads.pruning.loss import budget_tasks

    corpus = tmp_path / "code.txt"
    corpus.write_text(
        "def f(x):\n    return x * 2\n\n\nprint(f(3))\nprint(f(4))\n\n\nimport os\nprint(os.sep)\n",
        encoding="utf-8",
    )
    out = tmp_path / "pruned"
    code = main(
        ["bundled", "--prune", "2", "--export", str(out), "--corpus", str(corpus), "--tokens", "64"]
    )
    said = capsys.readouterr()
    assert code == 0, said.err
    tasks = budget_tasks(bundled, read_corpus_file(corpus).texts, 64)
    imp = measure_corpus_importance(bundled, tasks, ("zero",))
    heads = pruning_order(imp.zero)[:2]
    clean, after = corpus_losses(bundled, tasks, [[], heads])
    assert f"loss on {len(tasks)} texts" in said.out
    assert f"{clean:.4f} -> {after:.4f}" in said.out
    assert "parameters stored: 873,600 -> 873,600" in said.out
    assert f"written to {out}" in said.out
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(out)
    for layer, head in heads:
        rows = model.transformer.h[layer].attn.c_proj.weight[head * 32 : (head + 1) * 32]
        assert not rows.any()


@pytest.mark.parametrize(
    "args, code",
    [
        (["no-such-org/no-such-model", "--out", "x.csv"], 1),
        (["/no/such/dir", "--out", "x.csv"], 1),
        (["bundled", "--seq-len", "0", "--out", "x.csv"], 2),
        (["bundled"], 2),
        (["bundled", "--prune", "2"], 2),
        (["bundled", "--export", "/tmp/x"], 2),
        (["bundled", "--prune", "2", "--prune-groups", "1", "--export", "/tmp/x"], 2),
        (["bundled", "--prune", "2", "--export", "/no/such/dir/x"], 2),
        (["bundled", "--prune", "0", "--export", "/tmp/x"], 2),
        (["bundled", "--prune", "2", "--export", "/tmp/x", "--corpus", "/no/such.txt"], 1),
    ],
)
@pytest.mark.slow
def test_bad_models_and_arguments_give_one_line_and_nonzero(args, code):
    rc, error = one_line_error(args)
    assert rc == code and error.count("\n") == 0 and error.startswith("error: ")
