"""``python -m models.capture patterns``: the arrays it writes, against transformers' own
computations on tiny random models, and its refusal."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from models.capture import fidelity
from models.capture.__main__ import main
from models.capture.run import capture
from tests.attention.tiny_variants import PROMPT
from tests.model.variant_reference import delta_rule_inside_transformers, hf_attentions, hf_gate

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-5


def written(model: str, out: Path, prompt: str = PROMPT) -> dict[str, np.ndarray]:
    assert main(["patterns", model, "--prompt", prompt, "--out", str(out)]) == 0
    with np.load(out, allow_pickle=False) as found:
        return {name: found[name] for name in found.files}


def test_sinks_complete_each_row_of_the_patterns(tiny_variants, tmp_path):
    path = tiny_variants.path("gpt_oss")
    arrays = written(str(path), tmp_path / "p.npz")
    ids = torch.from_numpy(arrays["token_ids"])[None]
    attentions = hf_attentions(path, ids)
    assert [str(arrays[f"kind_{l}"]) for l in (0, 1)] == ["sliding", "softmax"]
    for layer in (0, 1):
        want = attentions[layer][0].numpy()
        np.testing.assert_allclose(arrays[f"pattern_{layer}"], want, atol=TOL, rtol=0)
        np.testing.assert_allclose(arrays[f"sink_{layer}"], 1 - want.sum(-1), atol=TOL, rtol=0)
        total = arrays[f"pattern_{layer}"].sum(-1) + arrays[f"sink_{layer}"]
        np.testing.assert_allclose(total, 1.0, atol=TOL)
    assert not any(name.startswith(("gate_", "mixing_")) for name in arrays)


def test_linear_and_gated_layers_write_their_own_arrays(tiny_variants, tmp_path):
    path = tiny_variants.path("qwen3_next")
    arrays = written(str(path), tmp_path / "q.npz")
    ids = torch.from_numpy(arrays["token_ids"])[None]
    assert str(arrays["kind_0"]) == "linear" and str(arrays["kind_1"]) == "softmax"
    assert "pattern_0" not in arrays and "mixing_1" not in arrays and "sink_1" not in arrays
    _, _, v, _, _, out = delta_rule_inside_transformers(path, ids)
    got = torch.einsum("hts,shd->thd", torch.from_numpy(arrays["mixing_0"]), v)
    torch.testing.assert_close(got, out, atol=TOL, rtol=1e-4)
    gate = hf_gate(path, ids, 1, arrays["gate_1"].shape[0])
    np.testing.assert_allclose(arrays["gate_1"], gate.numpy(), atol=TOL, rtol=0)
    np.testing.assert_allclose(
        arrays["pattern_1"], hf_attentions(path, ids)[0][0].numpy(), atol=TOL, rtol=0
    )


def test_a_plain_model_writes_patterns_and_kinds_only(bundled, tmp_path):
    arrays = written("bundled", tmp_path / "b.npz", "def f(x): return x")
    run = capture(bundled, "def f(x): return x")
    n_layers = bundled.facts.n_layers
    assert sorted(arrays) == sorted(
        ["token_ids"] + [f"{kind}_{l}" for l in range(n_layers) for kind in ("kind", "pattern")]
    )
    assert list(arrays["token_ids"]) == list(run.token_ids)
    np.testing.assert_array_equal(
        np.stack([arrays[f"pattern_{l}"] for l in range(3)]), run.patterns
    )


def test_a_run_above_the_tolerance_writes_nothing(bundled, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(fidelity.TOLERANCE, "float32", 1e-12)  # bundled's layers sit at ~1e-7
    out = tmp_path / "none.npz"
    assert main(["patterns", "bundled", "--prompt", "def f(x): return x", "--out", str(out)]) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: The patterns read from GPT2LMHeadModel do not reproduce")
    assert not out.exists()


@pytest.mark.slow
def test_the_command_line_as_typed(tmp_path):
    out = tmp_path / "cli.npz"
    done = subprocess.run(
        [sys.executable, "-m", "models.capture", "patterns", "bundled", "--prompt", "x = 1",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with np.load(out) as found:
        assert str(found["kind_0"]) == "softmax" and found["pattern_0"].ndim == 3
