"""Activation patching against hand-written hooks: on the bridge, and on a plain Hugging Face
GPT-2 loaded from the bundled checkpoint (forward pre-hooks on ``attn.c_proj``)."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from models.circuits import baseline, copying_task, head_effects, position_effects, prepare
from models.circuits.patching import patched_logit_diffs
from models.circuits.table import top_heads
from models.model.forward import every_layer, run_hooks, run_with_hooks, z_hook
from models.model.spec import BUNDLED_DIR
from models.progress import Cancelled


@pytest.fixture(scope="module")
def copying(bundled):
    setup = prepare(bundled, copying_task(bundled))
    return setup, baseline(bundled, setup)


@pytest.fixture(scope="module")
def hf_gpt2():
    return AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, attn_implementation="eager").eval()


def hf_logit_diff(hf, ids, answer, wrong, replace=None):
    """LD of a plain HF GPT-2; ``replace`` = (layer, head, position or None, clean inputs)."""
    d_head = hf.config.n_embd // hf.config.n_head
    seen, handles = {}, []
    for layer, block in enumerate(hf.transformer.h):

        def pre(_module, args, layer=layer):
            seen[layer] = args[0].detach().clone()
            if replace is None or replace[0] != layer:
                return None
            _, head, pos, clean = replace
            x = args[0].clone()
            cols = slice(head * d_head, (head + 1) * d_head)
            rows = slice(None) if pos is None else slice(pos, pos + 1)
            x[:, rows, cols] = clean[layer][:, rows, cols]
            return (x,)

        handles.append(block.attn.c_proj.register_forward_pre_hook(pre))
    try:
        with torch.no_grad():
            logits = hf(ids).logits
    finally:
        for handle in handles:
            handle.remove()
    last = logits[0, -1].double()
    return float(last[answer] - last[wrong]), seen


def test_per_head_effects_match_plain_transformers(bundled, copying, hf_gpt2):
    setup, base = copying
    a, w = setup.answer_id, setup.wrong_id
    ld_clean, clean_in = hf_logit_diff(hf_gpt2, setup.clean_ids, a, w)
    ld_corrupted, _ = hf_logit_diff(hf_gpt2, setup.corrupted_ids, a, w)
    assert base.ld_clean == pytest.approx(ld_clean, abs=1e-4)
    assert base.ld_corrupted == pytest.approx(ld_corrupted, abs=1e-4)
    expected = np.zeros((3, 4))
    for layer in range(3):
        for head in range(4):
            ld, _ = hf_logit_diff(hf_gpt2, setup.corrupted_ids, a, w, (layer, head, None, clean_in))
            expected[layer, head] = (ld - ld_corrupted) / (ld_clean - ld_corrupted)
    np.testing.assert_allclose(head_effects(bundled, setup, base), expected, atol=1e-4)


def test_per_position_effects_match_plain_transformers(bundled, copying, hf_gpt2):
    setup, base = copying
    a, w = setup.answer_id, setup.wrong_id
    ld_clean, clean_in = hf_logit_diff(hf_gpt2, setup.clean_ids, a, w)
    ld_corrupted, _ = hf_logit_diff(hf_gpt2, setup.corrupted_ids, a, w)
    expected = [
        (hf_logit_diff(hf_gpt2, setup.corrupted_ids, a, w, (0, 3, pos, clean_in))[0] - ld_corrupted)
        / (ld_clean - ld_corrupted)
        for pos in range(setup.n_tokens)
    ]
    np.testing.assert_allclose(
        position_effects(bundled, setup, base, 0, 3, batch=7), expected, atol=1e-4
    )


def test_copying_is_carried_by_the_induction_head(bundled, copying):
    setup, base = copying
    assert base.ld_clean > 5.0 > abs(base.ld_corrupted)
    effects = head_effects(bundled, setup, base)
    assert top_heads(effects, 1)[0][0] == "2.2"
    assert effects[2, 2] > 0.8 and np.delete(effects.ravel(), 10).max() < 0.2
    # a last-layer head reaches the logits only through the last position
    per_pos = position_effects(bundled, setup, base, 2, 2)
    assert per_pos[-1] == pytest.approx(effects[2, 2], abs=1e-6)
    np.testing.assert_allclose(per_pos[:-1], 0.0, atol=1e-6)


def test_patching_nothing_gives_the_corrupted_run(bundled, copying):
    setup, base = copying
    rows = [[], [(2, 2, None)], [], [(0, 1, 3)], []]
    ld = patched_logit_diffs(bundled, setup, base.clean_z, rows, batch=5)
    np.testing.assert_allclose(ld[[0, 2, 4]], base.ld_corrupted, atol=1e-5)
    assert abs(ld[1] - base.ld_corrupted) > 1.0


def test_patching_every_head_is_the_run_with_clean_attention_outputs(bundled, copying):
    setup, base = copying
    names = every_layer(z_hook, 3)
    clean = run_hooks(bundled, setup.clean_ids, names)
    hooks = [(name, lambda z, hook, name=name: clean[name].to(z.dtype)) for name in names]
    logits = run_with_hooks(bundled, setup.corrupted_ids, hooks)[0, -1].double()
    expected = float(logits[setup.answer_id] - logits[setup.wrong_id])
    every = [[(layer, head, None) for layer in range(3) for head in range(4)]]
    (ld,) = patched_logit_diffs(bundled, setup, base.clean_z, every)
    assert ld == pytest.approx(expected, abs=1e-5)
    # both prompts end in the same token and MLPs act per position, so with every attention
    # output taken from the clean run the last position's residual is the clean one
    assert ld == pytest.approx(base.ld_clean, abs=1e-4)


def test_batch_size_does_not_change_the_effects(bundled, copying):
    setup, base = copying
    np.testing.assert_allclose(
        head_effects(bundled, setup, base, batch=1),
        head_effects(bundled, setup, base, batch=5),
        atol=1e-5,
    )


def test_cancel_stops_between_passes_and_leaves_no_hooks(bundled, copying):
    setup, base = copying
    calls = []

    def progress(fraction, text):
        calls.append(fraction)
        if len(calls) == 2:
            raise Cancelled("stop")

    with pytest.raises(Cancelled):
        head_effects(bundled, setup, base, batch=3, progress=progress)
    assert len(calls) == 2
    (ld,) = patched_logit_diffs(bundled, setup, base.clean_z, [[]])
    assert ld == pytest.approx(base.ld_corrupted, abs=1e-5)
