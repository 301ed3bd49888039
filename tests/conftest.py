"""Shared fixtures: the two models every machine has (bundled GPT-2 and MiniLM), loaded once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from models.loading import load  # noqa: E402
from models.spec import ModelSpec  # noqa: E402


@pytest.fixture(scope="session")
def bundled():
    return load(ModelSpec("bundled"))


@pytest.fixture(scope="session")
def minilm():
    return load(ModelSpec("minilm"))


@pytest.fixture(params=["bundled", "minilm"], scope="session")
def any_model(request):
    return request.getfixturevalue(request.param)
