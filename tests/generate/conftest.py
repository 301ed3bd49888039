"""Hugging Face eager models on the fixtures' weights: the independent references of these tests,
loaded once per session."""

from __future__ import annotations

import pytest
from transformers import AutoModelForCausalLM


@pytest.fixture(scope="session")
def eager():
    """``eager(model)``: the eager ``AutoModelForCausalLM`` on ``model``'s weights (float32)."""
    loaded: dict[str, object] = {}

    def get(model):
        key = model.spec.path_or_name
        if key not in loaded:
            loaded[key] = AutoModelForCausalLM.from_pretrained(
                key, attn_implementation="eager"
            ).eval()
        return loaded[key]

    return get
