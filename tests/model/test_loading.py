"""Every way a model load can fail gives a ModelLoadError with a message for the page."""

import json
import shutil

import pytest
import torch

from models.model.loading import ModelLoadError, check_fits, load
from models.model.spec import BUNDLED_DIR, ModelSpec


def test_spec_kinds(tmp_path):
    assert ModelSpec("bundled").kind == "bundled"
    assert ModelSpec("minilm").kind == "minilm"
    assert ModelSpec(str(tmp_path)).kind == "local"
    assert ModelSpec("./some/dir").kind == "local"
    assert ModelSpec("EleutherAI/pythia-70m").kind == "hub"
    assert ModelSpec("gpt2").trust_remote_code is False


def test_unknown_hub_name_offline():
    with pytest.raises(ModelLoadError, match=r"runs offline .* no copy of it"):
        load(ModelSpec("nobody-here/not-a-model-xyz"))


def test_missing_directory(tmp_path):
    with pytest.raises(ModelLoadError, match="No directory"):
        load(ModelSpec(str(tmp_path / "nope")))


def test_directory_that_is_not_a_model(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        load(ModelSpec(str(tmp_path)))


def test_corrupt_weights(tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(BUNDLED_DIR, broken, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (broken / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ModelLoadError, match="Could not load"):
        load(ModelSpec(str(broken)))


def test_unsupported_architecture(tmp_path):
    bad = tmp_path / "weird"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "no_such_arch_type"}))
    with pytest.raises(ModelLoadError):
        load(ModelSpec(str(bad)))


def test_too_large_is_refused_with_numbers():
    with pytest.raises(ModelLoadError, match=r"7,000 M parameters.*26\.08 GiB.*1\.00 GiB"):
        check_fits(7_000_000_000, ModelSpec("big/model"), free=1024**3)
    check_fits(1000, ModelSpec("small"), free=1024**3)  # fits: no error


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_without_gpu_is_a_clear_message():
    with pytest.raises(ModelLoadError, match="No CUDA GPU"):
        load(ModelSpec("bundled", device="cuda"))


def test_bundled_model_is_small_and_quick(bundled):
    size = sum(p.stat().st_size for p in BUNDLED_DIR.iterdir() if p.is_file())
    assert size < 25 * 1024**2
    assert bundled.facts.n_params < 5_000_000


def test_device_map_placement_gives_the_same_patterns(bundled):
    """accelerate placement ("auto" puts every layer on the CPU here) changes nothing."""
    from models.capture.run import capture

    placed = load(ModelSpec("bundled", device_map="auto"))
    assert placed.bridge.cfg.device == "cpu"
    prompt = "placement should not change a single number"
    assert (capture(placed, prompt).patterns == capture(bundled, prompt).patterns).all()


def test_parameter_count_matches_plain_transformers(bundled):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(BUNDLED_DIR)
    assert bundled.facts.n_params == sum(p.numel() for p in hf.parameters()) == 873_600
