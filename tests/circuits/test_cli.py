"""``python -m models.circuits patch``: the CSV it writes, what it prints, its errors."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.circuits import baseline, copying_task, head_effects, prepare
from models.circuits.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def test_bundled_copying_table(bundled, tmp_path, capsys):
    task = copying_task(bundled)
    out = tmp_path / "patch.csv"
    code = main(
        [
            "patch",
            "bundled",
            "--clean",
            task.clean,
            "--corrupted",
            task.corrupted,
            "--answer",
            task.answer,
            "--wrong",
            task.wrong,
            "--batch",
            "5",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    setup = prepare(bundled, task)
    base = baseline(bundled, setup)
    assert f"clean LD {base.ld_clean:.6g}" in printed.out
    assert f"corrupted LD {base.ld_corrupted:.6g}" in printed.out
    assert "largest patch effects: 2.2" in printed.err
    table = pd.read_csv(out, dtype={"L.H": str})
    assert list(table.columns) == ["L.H", "layer", "head", "patch_effect", "dla"]
    assert table["L.H"].tolist() == [f"{layer}.{h}" for layer in range(3) for h in range(4)]
    np.testing.assert_allclose(
        table["patch_effect"], head_effects(bundled, setup, base).ravel(), atol=1e-5
    )
    np.testing.assert_allclose(table["dla"], base.attribution.heads.ravel(), rtol=1e-5, atol=1e-6)


TASK = ["--clean", "x = foo(1)", "--corrupted", "x = bar(1)", "--answer", "\n", "--wrong", " +"]


def in_process_error(args: list[str], capsys) -> tuple[int, str]:
    try:
        rc = main(args)
    except SystemExit as stop:
        rc = stop.code
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    return rc, "\n".join(lines)


@pytest.mark.parametrize(
    "args, code, says",
    [
        (["patch", "bundled", *TASK[:5], " xyzqq", "--wrong", " +"], 1, "not one"),
        (
            ["patch", "bundled", *TASK[:1], "x = foo(1)", "--corrupted", "x = foo(1)", *TASK[4:]],
            1,
            "same tokens",
        ),
        (["patch", "minilm", *TASK], 1, "causal"),
        (["patch", "bundled", *TASK, "--batch", "0"], 2, "positive"),
        (["patch", "bundled", "--clean", "x"], 2, "required"),
        (["bundled"], 2, "invalid choice"),
        (["atp", "minilm", *TASK], 1, "causal"),
        (["paths", "bundled", *TASK, "--receiver", "9.9", "--input", "q"], 1, "not a head"),
        (["paths", "bundled", *TASK, "--receiver", "2", "--input", "q"], 1, "not a head"),
        (["paths", "bundled", *TASK, "--receiver", "2.1", "--input", "z"], 2, "invalid choice"),
        (["weights"], 2, "required"),
    ],
)
def test_bad_input_gives_one_line_and_nonzero(args, code, says, tmp_path, capsys):
    rc, error = in_process_error([*args, "--out", str(tmp_path / "x.csv")], capsys)
    assert rc == code and error.count("\n") == 0 and error.startswith("error: ")
    assert says in error
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.slow
def test_module_entry_point_reports_a_length_mismatch(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "models.circuits",
            "patch",
            "bundled",
            "--clean",
            "x = foo(1)",
            "--corrupted",
            "x = foobarbaz(1, 2)",
            "--answer",
            "\n",
            "--wrong",
            " +",
            "--out",
            str(tmp_path / "x.csv"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1
    assert "same number of tokens" in errors[0] and "corrupted prompt" in errors[0]


# --- atp, paths, weights ----------------------------------------------------------------------

ATP_EXACT_COLUMNS = [
    "L.H",
    "layer",
    "head",
    "atp",
    "atp_star",
    "patch_effect",
    "checked",
    "q_atp",
    "q_atp_star",
    "kv_head",
    "k_atp",
    "k_atp_star",
    "v_atp",
    "v_atp_star",
    "last_row_max",
]


def copying_args(bundled):
    task = copying_task(bundled)
    return task, [
        "--clean",
        task.clean,
        "--corrupted",
        task.corrupted,
        "--answer",
        task.answer,
        "--wrong",
        task.wrong,
    ]


def test_atp_table_with_exact_effects(bundled, tmp_path, capsys):
    from models.circuits import attribution_patching

    task, args = copying_args(bundled)
    out = tmp_path / "atp.csv"
    code = main(["atp", "bundled", *args, "--exact", "--check-top", "2", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "AtP* (QK fix, GradDrop): 2 forward" not in printed.err  # the check adds passes
    assert "AtP* (QK fix, GradDrop): 4 forward" in printed.err
    table = pd.read_csv(out, dtype={"L.H": str})
    assert list(table.columns) == ATP_EXACT_COLUMNS
    setup = prepare(bundled, task)
    result = attribution_patching(bundled, setup, qk_fix=True, grad_drop=True)
    np.testing.assert_allclose(table["atp"], result.z.ravel(), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(table["atp_star"], result.z_star.ravel(), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(table["k_atp_star"], result.k_star.ravel(), rtol=1e-5, atol=1e-8)
    exact = head_effects(bundled, setup, baseline(bundled, setup)).ravel()
    np.testing.assert_allclose(table["patch_effect"], exact, atol=1e-5)
    checked = table["checked"].notna().to_numpy()
    assert checked.sum() == 2
    np.testing.assert_allclose(table["checked"][checked], exact[checked], atol=1e-5)
    assert f"clean LD {result.ld_clean:.6g}" in printed.out


def test_atp_table_columns_without_options(tmp_path, capsys, bundled):
    _, args = copying_args(bundled)
    out = tmp_path / "atp.csv"
    assert main(["atp", "bundled", *args, "--no-grad-drop", "--out", str(out)]) == 0
    from models.circuits.commands import ATP_COLUMNS

    table = pd.read_csv(out)
    assert list(table.columns) == ATP_COLUMNS
    np.testing.assert_array_equal(table["kv_head"], np.tile(np.arange(4), 3))
    np.testing.assert_allclose(table["atp"], table["atp_star"])  # z: only GradDrop differs


def test_paths_table(bundled, tmp_path, capsys):
    from models.circuits import path_patching
    from models.head import Head

    task, args = copying_args(bundled)
    out = tmp_path / "paths.csv"
    code = main(["paths", "bundled", *args, "--receiver", "2.2", "--input", "k", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    table = pd.read_csv(out, dtype={"L.H": str})
    assert list(table.columns) == ["L.H", "layer", "head", "path_effect"]
    expected = path_patching(bundled, prepare(bundled, task), Head(2, 2), "k").effects
    np.testing.assert_allclose(table["path_effect"], expected.ravel(), atol=1e-6)
    assert (table.loc[table["layer"] >= 2, "path_effect"] == 0).all()
    assert table.loc[table["L.H"] == "0.3", "path_effect"].item() < -0.5


def test_weights_tables(tmp_path, capsys):
    out, pairs = tmp_path / "w.csv", tmp_path / "pairs.csv"
    assert main(["weights", "bundled", "--out", str(out), "--pairs", str(pairs)]) == 0
    assert "tokens basis" in capsys.readouterr().err
    table = pd.read_csv(out, dtype={"L.H": str})
    assert list(table.columns) == [
        "L.H",
        "layer",
        "head",
        "copying",
        "qk_prev",
        "qk_self",
        "qk_first",
        "qk_locality",
    ]
    assert len(table) == 12 and table["copying"].between(-1, 1).all()
    pair_table = pd.read_csv(pairs, dtype={"sender": str, "receiver": str})
    assert list(pair_table.columns) == [
        "sender",
        "receiver",
        "q_composition",
        "k_composition",
        "v_composition",
    ]
    assert len(pair_table) == 48  # 4 x 4 for each of the layer pairs (0, 1), (0, 2), (1, 2)
    assert (pair_table["sender"].str[0] < pair_table["receiver"].str[0]).all()


def test_weights_of_an_encoder(tmp_path, capsys):
    out = tmp_path / "w.csv"
    assert main(["weights", "minilm", "--out", str(out)]) == 0
    assert "residual basis" in capsys.readouterr().err
    assert len(pd.read_csv(out)) == 72
