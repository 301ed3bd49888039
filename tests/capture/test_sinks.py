"""The measured attention sink, against Hugging Face eager attention on the same token ids."""

import numpy as np
import pytest
import torch

from models.capture.run import capture
from models.capture.sinks import measured_sink, sample_rows

TEXT = (
    "The lighthouse keeper climbed the stairs at dusk, lit the lamp, and watched the ships "
    "pass the rocks one by one until the morning came back over the water."
)


@pytest.fixture(scope="module")
def eager(bundled):
    from transformers import AutoModelForCausalLM

    run = capture(bundled, TEXT)
    hf = AutoModelForCausalLM.from_pretrained(
        bundled.spec.path_or_name, attn_implementation="eager"
    )
    with torch.no_grad():
        out = hf.eval()(torch.tensor([run.token_ids]), output_attentions=True)
    return run, torch.stack([a[0] for a in out.attentions]).double().numpy()


def test_sample_rows_skip_the_first_half_of_a_causal_prompt():
    assert sample_rows(100, causal=True, k=4) == [50, 66, 82, 99]
    assert sample_rows(100, causal=False, k=3) == [0, 49, 99]
    assert sample_rows(2, causal=True) == [0, 1]


@pytest.mark.parametrize("dense_limit", [None, 0], ids=["dense", "factored"])
def test_sink_is_the_key_with_the_largest_mean_weight(bundled, eager, dense_limit):
    _, patterns = eager
    kwargs = {} if dense_limit is None else {"dense_limit": dense_limit}
    run = capture(bundled, TEXT, **kwargs)
    got = measured_sink(run)
    rows = sample_rows(run.n_tokens, causal=True)
    per_head = patterns[:, :, rows].mean(axis=2).reshape(-1, run.n_tokens)  # (layer head) key
    overall = per_head.mean(axis=0)
    assert got.rows == tuple(rows)
    assert got.position == int(np.argmax(overall)) == 0  # GPT-2 parks on its first token
    assert got.mean_weight == pytest.approx(overall.max(), abs=1e-5)
    assert got.n_heads == int((per_head.argmax(axis=1) == got.position).sum())
    assert got.n_total == per_head.shape[0] == 12  # 3 layers of 4 heads
