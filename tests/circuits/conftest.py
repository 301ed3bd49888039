"""Fixtures of the exact QK split's tests: each model beside its plain ``transformers`` twin."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from models.model.forward import tokenize
from models.model.loading import load
from models.model.spec import BUNDLED_DIR, ModelSpec, minilm_dir
from tests.attention.tiny_models import PROMPT, build_qk
from tests.circuits.why_reference import Reference


def reference(path, family: str) -> Reference:
    """A fresh Hugging Face model from ``path`` (float32, eager), recorded."""
    loader = AutoModel if family == "bert" else AutoModelForCausalLM
    return Reference(
        loader.from_pretrained(path, attn_implementation="eager", dtype=torch.float32), family
    )


@pytest.fixture(scope="session")
def why_tiny(tmp_path_factory):
    """Tiny random Qwen3 (QK-norm) and Gemma 2 (soft-cap) checkpoints, loaded by the app."""
    dirs = build_qk(tmp_path_factory.mktemp("why_tiny"))
    return {name: (path, load(ModelSpec(str(path)))) for name, path in dirs.items()}


@pytest.fixture(scope="session")
def why_cases(bundled, minilm, why_tiny):
    """name -> (loaded model, its reference, token ids of PROMPT as the explorer makes them)."""
    qwen, gemma = why_tiny["qwen3_qk_norm"], why_tiny["gemma2_softcap"]
    out = {
        "bundled": (bundled, reference(BUNDLED_DIR, "gpt2")),
        "minilm": (minilm, reference(minilm_dir(), "bert")),
        "qwen3_qk_norm": (qwen[1], reference(qwen[0], "qwen3")),
        "gemma2_softcap": (gemma[1], reference(gemma[0], "gemma2")),
    }
    return {name: (model, ref, tokenize(model, PROMPT)[0]) for name, (model, ref) in out.items()}
