"""``python -m models.capture compare``: the CSV it writes, its errors and exit codes."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.capture.__main__ import main
from models.capture.compare import head_divergence
from models.capture.run import capture
from models.capture.word_split import split_words

ROOT = Path(__file__).resolve().parents[2]
A = "When Mary and John went to the store, John gave a drink to Mary"
B = "When Mary and John went to the shop, Mary gave a drink to John"


@pytest.mark.parametrize("words", [False, True])
def test_writes_layer_head_divergence_for_every_head(bundled, tmp_path, words):
    out = tmp_path / "compare.csv"
    assert (
        main(
            ["compare", "bundled", "--a", A, "--b", B, "--out", str(out)]
            + (["--words"] if words else [])
        )
        == 0
    )
    table = pd.read_csv(out)
    assert list(table.columns) == ["layer", "head", "divergence"]
    assert len(table) == bundled.facts.n_total_heads
    assert list(zip(table["layer"], table["head"], strict=True))[:5] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 0),
    ]
    run_a, run_b = capture(bundled, A), capture(bundled, B)
    parts = (
        [split_words(bundled.tokenizer, r.prompt, r.token_ids, r.tokens) for r in (run_a, run_b)]
        if words
        else [None, None]
    )
    expected = head_divergence(run_a, run_b, *parts).divergence.ravel()
    np.testing.assert_allclose(table["divergence"], expected, rtol=1e-5, atol=1e-9)


def run_cli(args: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as stop:  # argument errors exit from the parser
        code = stop.code
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    return code, "\n".join(lines)


@pytest.mark.parametrize(
    "args, code",
    [
        (["compare", "bundled", "--a", "x", "--out", "x.csv"], 2),
        (["compare", "bundled", "--a", "x", "--b", "y", "--out", "/no/such/dir/x.csv"], 2),
        (["compare", "bundled", "--a", "   ", "--b", "y", "--out", "x.csv"], 1),
        (["nothing"], 2),
    ],
)
def test_bad_arguments_give_one_line_and_nonzero(args, code, tmp_path, capsys):
    args = [str(tmp_path / a) if a == "x.csv" else a for a in args]
    rc, error = run_cli(args, capsys)
    assert rc == code and error.count("\n") == 0 and error.startswith("error: ")


@pytest.mark.slow
def test_runs_as_a_module(tmp_path):
    out = tmp_path / "c.csv"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "models.capture",
            "compare",
            "bundled",
            "--a",
            A,
            "--b",
            B,
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-500:]
    assert out.read_text().splitlines()[0] == "layer,head,divergence"
    assert "aligned" in proc.stderr or "Equal lengths" in proc.stderr
