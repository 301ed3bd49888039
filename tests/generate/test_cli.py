"""``python -m models.generate``: the files it writes (names, shapes, values), its errors."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from models.generate import GenerationSettings, generate
from models.generate.__main__ import main
from models.generate.eviction import perplexity, policy_pass
from models.generate.sweep import bundled_passage
from models.model.forward import tokenize

PROMPT = "The ferry leaves the harbour at"


@pytest.fixture
def loaded_once(bundled, monkeypatch):
    """The command line's own load of ``bundled`` replaced by the session's (tested once in
    the npz test, which loads for real)."""
    monkeypatch.setattr("models.model.loading.load", lambda spec, progress=None: bundled)


def test_generation_npz_has_the_documented_arrays(bundled, tmp_path, capsys):
    out = tmp_path / "gen.npz"
    code = main(["bundled", "--prompt", PROMPT, "--max-new-tokens", "5", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    saved = np.load(out)
    want = generate(bundled, PROMPT, GenerationSettings(max_new_tokens=5))
    n_prompt, total = want.n_prompt, len(want.ids)
    assert saved["ids"].tolist() == list(want.ids) and int(saved["n_prompt"]) == n_prompt
    rows = saved["rows"]
    assert rows.dtype == np.float32 and rows.shape == (5, 3, 4, total)
    for step in range(5):
        length = n_prompt + step
        np.testing.assert_allclose(rows[step, :, :, :length], want.rows(step), atol=1e-6)
        assert not rows[step, :, :, length:].any()
        np.testing.assert_allclose(rows[step].sum(-1), 1.0, atol=1e-5)
    assert saved["probs"].shape == saved["entropy"].shape == (5,)
    assert saved["sink"].shape == saved["prompt_share"].shape == (5, 3, 4)
    assert int(saved["cache_bytes"]) == want.cache_bytes


def test_sampling_flags_sample_reproducibly(loaded_once, tmp_path):
    paths = [tmp_path / f"{i}.npz" for i in range(3)]
    for path, seed in zip(paths, ("3", "3", "4"), strict=True):
        args = [
            "bundled",
            "--prompt",
            PROMPT,
            "--max-new-tokens",
            "12",
            "--temperature",
            "1.3",
            "--top-k",
            "40",
            "--top-p",
            "0.9",
            "--seed",
            seed,
            "--out",
            str(path),
        ]
        assert main(args) == 0
    ids = [np.load(path)["ids"].tolist() for path in paths]
    assert ids[0] == ids[1] != ids[2]


def test_eviction_csv_rows(bundled, loaded_once, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text(bundled_passage(), encoding="utf-8")
    out = tmp_path / "evict.csv"
    args = [
        "bundled",
        "--evict",
        "--text",
        str(text),
        "--budgets",
        "16,32",
        "--sinks",
        "4",
        "--max-tokens",
        "64",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    with out.open(encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["policy", "budget", "perplexity"]
    assert [(r[0], int(r[1])) for r in rows[1:]] == [
        ("full", 64),
        ("window", 16),
        ("window", 32),
        ("sinks", 16),
        ("sinks", 32),
        ("h2o", 16),
        ("h2o", 32),
    ]
    ids = tokenize(bundled, bundled_passage(), 64)[0]
    window = perplexity(policy_pass(bundled, ids, "window", 16))
    assert float(rows[2][2]) == pytest.approx(window, rel=1e-5)


@pytest.mark.parametrize(
    "args, words",
    [
        (["bundled", "--out", "x.npz"], "needs --prompt and --max-new-tokens"),
        (["bundled", "--evict", "--budgets", "8", "--out", "x.csv"], "needs --text"),
        (
            ["bundled", "--evict", "--text", "t", "--budgets", "8,-1", "--out", "x.csv"],
            "positive numbers",
        ),
        (
            ["bundled", "--prompt", "x", "--max-new-tokens", "0", "--out", "x.npz"],
            "positive whole number",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, words, capsys):
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_user_errors_exit_1_with_the_message(loaded_once, tmp_path, capsys):
    out = tmp_path / "x.npz"
    assert (
        main(
            [
                "bundled",
                "--prompt",
                PROMPT,
                "--max-new-tokens",
                "3",
                "--temperature",
                "0",
                "--out",
                str(out),
            ]
        )
        == 1
    )
    assert "temperature between 0.01 and 100" in capsys.readouterr().err
    assert main(["bundled", "--prompt", PROMPT, "--max-new-tokens", "400", "--out", str(out)]) == 1
    assert "at most 128 tokens" in capsys.readouterr().err
    assert not out.exists()
