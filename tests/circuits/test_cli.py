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
    code = main(["patch", "bundled", "--clean", task.clean, "--corrupted", task.corrupted,
                 "--answer", task.answer, "--wrong", task.wrong, "--batch", "5",
                 "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    setup = prepare(bundled, task)
    base = baseline(bundled, setup)
    assert f"clean LD {base.ld_clean:.6g}" in printed.out
    assert f"corrupted LD {base.ld_corrupted:.6g}" in printed.out
    assert "largest patch effects: 2.2" in printed.err
    table = pd.read_csv(out, dtype={"L.H": str})
    assert list(table.columns) == ["L.H", "layer", "head", "patch_effect", "dla"]
    assert table["L.H"].tolist() == [f"{l}.{h}" for l in range(3) for h in range(4)]
    np.testing.assert_allclose(table["patch_effect"],
                               head_effects(bundled, setup, base).ravel(), atol=1e-5)
    np.testing.assert_allclose(table["dla"], base.attribution.heads.ravel(), rtol=1e-5,
                               atol=1e-6)


TASK = ["--clean", "x = foo(1)", "--corrupted", "x = bar(1)", "--answer", "\n", "--wrong", " +"]


def in_process_error(args: list[str], capsys) -> tuple[int, str]:
    try:
        rc = main(args)
    except SystemExit as stop:
        rc = stop.code
    lines = [l for l in capsys.readouterr().err.splitlines() if l.startswith("error:")]
    return rc, "\n".join(lines)


@pytest.mark.parametrize("args, code, says", [
    (["patch", "bundled", *TASK[:5], " xyzqq", "--wrong", " +"], 1, "not one"),
    (["patch", "bundled", *TASK[:1], "x = foo(1)", "--corrupted", "x = foo(1)", *TASK[4:]],
     1, "same tokens"),
    (["patch", "minilm", *TASK], 1, "causal"),
    (["patch", "bundled", *TASK, "--batch", "0"], 2, "positive"),
    (["patch", "bundled", "--clean", "x"], 2, "required"),
    (["bundled"], 2, "invalid choice"),
])
def test_bad_input_gives_one_line_and_nonzero(args, code, says, tmp_path, capsys):
    rc, error = in_process_error(args + ["--out", str(tmp_path / "x.csv")], capsys)
    assert rc == code and error.count("\n") == 0 and error.startswith("error: ")
    assert says in error
    assert not (tmp_path / "x.csv").exists()


def test_module_entry_point_reports_a_length_mismatch(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "models.circuits", "patch", "bundled", "--clean", "x = foo(1)",
         "--corrupted", "x = foobarbaz(1, 2)", "--answer", "\n", "--wrong", " +",
         "--out", str(tmp_path / "x.csv")], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1
    assert "same number of tokens" in errors[0] and "corrupted prompt" in errors[0]
