"""``python -m models.circuits why``: the CSV it writes, what it prints, its errors."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from models.circuits.__main__ import main
from tests.attention.tiny_models import PROMPT

PARTS = {"query_part": str, "key_part": str, "band": str}


def run(args: list[str], capsys) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


def test_bundled_cell_adds_up_to_the_reference_logit(why_cases, tmp_path, capsys):
    _, ref, ids = why_cases["bundled"]
    records = ref.run(ids)
    raw, weights = ref.raw(records, 2, 1), records[2]["weights"][0, 1]
    query = ids.shape[1] - 1
    out = tmp_path / "why.csv"
    code, err = run(
        ["why", "bundled", "--prompt", PROMPT, "--head", "2.1", "--query", str(query),
         "--key", "0", "--out", str(out)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    table = pd.read_csv(out, dtype=PARTS)
    assert list(table.columns) == ["query_part", "key_part", "score"]
    parts = ["embed", "pos_embed", *[f"{layer}.{h}" for layer in range(2) for h in range(4)]]
    assert set(parts) <= set(table["query_part"]) and "b_Q" in set(table["query_part"])
    assert "b_K" in set(table["key_part"]) and "mlp.1" in set(table["key_part"])
    assert len(table) == table["query_part"].nunique() * table["key_part"].nunique()
    row_scale = float(raw[query, : query + 1].abs().max())
    assert table["score"].sum() == pytest.approx(float(raw[query, 0]), abs=1e-5 * row_scale)
    printed = dict(re.findall(r"\] (score|weight) (\S+)", err))
    assert float(printed["score"]) == pytest.approx(float(raw[query, 0]), abs=1e-5 * row_scale)
    assert float(printed["weight"]) == pytest.approx(float(weights[query, 0]), rel=1e-5)
    assert f"query {query} " in err and "key 0 " in err


def test_bands_add_a_band_column(why_cases, why_tiny, tmp_path, capsys):
    path, _ = why_tiny["qwen3_qk_norm"]
    _, ref, ids = why_cases["qwen3_qk_norm"]
    raw = ref.raw(ref.run(ids), 1, 3)
    query, key = ids.shape[1] - 1, ids.shape[1] - 3
    out = tmp_path / "bands.csv"
    code, err = run(
        ["why", str(path), "--prompt", PROMPT, "--head", "1.3", "--query", str(query),
         "--key", str(key), "--bands", "--out", str(out)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    table = pd.read_csv(out, dtype=PARTS)
    assert list(table.columns) == ["query_part", "key_part", "band", "score"]
    assert sorted(table["band"].unique(), key=int) == [str(f) for f in range(8)]
    row_scale = float(raw[query, : query + 1].abs().max())
    assert table["score"].sum() == pytest.approx(float(raw[query, key]), abs=1e-5 * row_scale)
    assert "band 0: 6.283 tokens per turn" in err and "band 7: 1.987e+04 tokens" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--head", "7.0", "--query", "3", "--key", "1"], "is not a head of"),
        (["--head", "1.0", "--query", "3", "--key", "5"], "never sees key 5"),
        (["--head", "1.0", "--query", "300", "--key", "5"], "outside the prompt"),
        (["--head", "1.0", "--query", "3", "--key", "1", "--bands"], "no RoPE"),
        (["--head", "one", "--query", "3", "--key", "1"], "is not a head"),
    ],
)
def test_errors_are_one_line(bundled, tmp_path, capsys, args, message):
    out = tmp_path / "never.csv"
    code, err = run(["why", "bundled", "--prompt", PROMPT, *args, "--out", str(out)], capsys)
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and message in lines[0]
    assert not out.exists()
