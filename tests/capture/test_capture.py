"""Captured patterns against Hugging Face eager attention on the same weights and tokens."""

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from models.capture.run import capture
from models.errors import PromptError
from models.model.forward import tokenize
from models.model.spec import BUNDLED_DIR, minilm_dir

PROMPT = "The cat sat on the mat. The cat sat on the mat again, said Ms. O'Neil.\nDone!"


@pytest.fixture(scope="module")
def hf_models():
    return {
        "bundled": AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, attn_implementation="eager"),
        "minilm": AutoModel.from_pretrained(minilm_dir(), attn_implementation="eager"),
    }


def hf_patterns(hf_model, ids: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        out = hf_model.eval()(ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    return torch.stack(out.attentions)[:, 0].numpy()


@pytest.mark.parametrize("name", ["bundled", "minilm"])
def test_patterns_match_hf_eager(request, hf_models, name):
    model = request.getfixturevalue(name)
    run = capture(model, PROMPT)
    ids, _ = tokenize(model, PROMPT)
    expected = hf_patterns(hf_models[name], ids)
    assert (
        run.patterns.shape
        == expected.shape
        == (model.facts.n_layers, model.facts.n_heads, run.n_tokens, run.n_tokens)
    )
    np.testing.assert_allclose(run.patterns, expected, atol=1e-5, rtol=0)


def test_rows_sum_to_one_and_causality(any_model):
    run = capture(any_model, PROMPT)
    np.testing.assert_allclose(run.patterns.sum(-1), 1.0, atol=1e-5)
    upper = np.triu(np.ones((run.n_tokens, run.n_tokens), dtype=bool), k=1)
    above = run.patterns[..., upper]
    if any_model.facts.causal:
        assert np.abs(above).max() == 0.0
    else:
        assert above.max() > 1e-3  # an encoder looks ahead


def test_bundled_prepends_bos_and_labels_tokens(bundled):
    run = capture(bundled, "Hello world\n")
    assert run.token_ids[0] == bundled.tokenizer.bos_token_id == 0
    assert run.first_is_special and run.tokens[0] == "<|endoftext|>"
    assert "↵" in "".join(run.tokens) and "␣" in "".join(run.tokens)
    assert bundled.facts.causal and bundled.facts.positional == "standard"


def test_minilm_is_bidirectional_with_cls_and_sep(minilm):
    run = capture(minilm, "a small test")
    assert run.tokens[0] == "[CLS]" and run.tokens[-1] == "[SEP]"
    assert not minilm.facts.causal and minilm.facts.n_kv_heads == minilm.facts.n_heads


def test_long_prompt_is_truncated_to_context(any_model):
    prompt = "tok " * 4000
    run = capture(any_model, prompt)
    assert run.n_tokens == any_model.facts.n_ctx and run.truncated
    assert run.n_prompt_tokens > run.n_tokens
    if not any_model.facts.causal:
        assert run.tokens[-1] == "[SEP]"


@pytest.mark.parametrize("prompt", ["", "   \n\t "])
def test_empty_prompt_is_refused(bundled, prompt):
    with pytest.raises(PromptError, match="empty"):
        capture(bundled, prompt)


def test_capture_leaves_no_hooks_behind(bundled):
    capture(bundled, "one two three")
    live = [
        name
        for name, hp in bundled.bridge.hook_dict.items()
        if hp._forward_hooks or hp._backward_hooks
    ]
    assert live == []
    attention = [m for m in bundled.bridge.modules() if hasattr(m, "_pattern")]
    assert attention and all(not m._forward_hooks and m._pattern is None for m in attention)
