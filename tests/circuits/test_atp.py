"""Attribution patching on the bundled model against independent references: autograd on a plain
float64 Hugging Face GPT-2 and a finite difference (AtP), exact patching where only the softmax
is nonlinear (QK fix), detached block outputs (GradDrop), hand-computed cases (pure functions)."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from models.circuits import attribution_patching, baseline, copying_task, head_effects, prepare
from models.circuits.atp_fixes import grad_drop_combine, patched_patterns
from models.circuits.gradients import gradient_run
from models.circuits.input_patching import input_effects
from models.model.forward import (
    attn_out_hook,
    every_layer,
    final_norm_scale_hook,
    mlp_out_hook,
    run_hooks,
    run_with_hooks,
    z_hook,
)
from models.model.spec import BUNDLED_DIR


@pytest.fixture(scope="module")
def setup(bundled):
    return prepare(bundled, copying_task(bundled))


@pytest.fixture(scope="module")
def plain_atp(bundled, setup):
    return attribution_patching(bundled, setup, qk_fix=False)


@pytest.fixture(scope="module")
def hf64():
    return AutoModelForCausalLM.from_pretrained(
        BUNDLED_DIR, attn_implementation="eager", torch_dtype=torch.float64
    ).eval()


def hf_run(hf, ids, answer, wrong, nudge=None):
    """LD of a plain HF GPT-2 and its gradient at each block's head outputs (``c_proj``
    input) and ``q|k|v`` (``c_attn`` output); ``nudge`` = (layer, columns, delta) is added to
    that block's head outputs."""
    leaves, handles = {}, []
    for layer, block in enumerate(hf.transformer.h):

        def pre(_module, args, layer=layer):
            x = args[0]
            if nudge is not None and nudge[0] == layer:
                x = x.clone()
                x[..., nudge[1]] += nudge[2]
            leaves["z", layer] = torch.zeros_like(x, requires_grad=True)
            return (x + leaves["z", layer],)

        def post(_module, _args, out, layer=layer):
            leaves["qkv", layer] = torch.zeros_like(out, requires_grad=True)
            return out + leaves["qkv", layer]

        handles.append(block.attn.c_proj.register_forward_pre_hook(pre))
        handles.append(block.attn.c_attn.register_forward_hook(post))
    try:
        logits = hf(ids).logits
    finally:
        for handle in handles:
            handle.remove()
    ld = logits[0, -1, answer] - logits[0, -1, wrong]
    names = list(leaves)
    grads = dict(zip(names, torch.autograd.grad(ld, [leaves[n] for n in names]), strict=True))
    return float(ld.detach()), grads


def hf_values(hf, ids):
    """Each block's head outputs and q|k|v of a plain HF GPT-2 (float64)."""
    seen, handles = {}, []
    for layer, block in enumerate(hf.transformer.h):
        handles.append(
            block.attn.c_proj.register_forward_pre_hook(
                lambda _m, args, layer=layer: seen.__setitem__(("z", layer), args[0].detach())
            )
        )
        handles.append(
            block.attn.c_attn.register_forward_hook(
                lambda _m, _a, out, layer=layer: seen.__setitem__(("qkv", layer), out.detach())
            )
        )
    try:
        with torch.no_grad():
            hf(ids)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def test_atp_is_the_gradient_of_a_plain_float64_model(setup, plain_atp, hf64):
    a, w = setup.answer_id, setup.wrong_id
    clean, corrupted = hf_values(hf64, setup.clean_ids), hf_values(hf64, setup.corrupted_ids)
    ld_corrupted, grads = hf_run(hf64, setup.corrupted_ids, a, w)
    with torch.no_grad():
        logits = hf64(setup.clean_ids).logits
    gap = float(logits[0, -1, a] - logits[0, -1, w]) - ld_corrupted
    d_head, d_model = 32, 128
    expected = {
        "z": np.zeros((3, 4)),
        "q": np.zeros((3, 4)),
        "k": np.zeros((3, 4)),
        "v": np.zeros((3, 4)),
    }
    positions = np.zeros((3, 4, setup.n_tokens))
    for layer in range(3):
        for head in range(4):
            cols = slice(head * d_head, (head + 1) * d_head)
            per_pos = ((clean["z", layer] - corrupted["z", layer]) * grads["z", layer])[0, :, cols]
            positions[layer, head] = per_pos.sum(-1).numpy() / gap
            expected["z"][layer, head] = float(per_pos.sum()) / gap
            delta = (clean["qkv", layer] - corrupted["qkv", layer]) * grads["qkv", layer]
            for part, name in enumerate("qkv"):
                block = slice(part * d_model + head * d_head, part * d_model + (head + 1) * d_head)
                expected[name][layer, head] = float(delta[0, :, block].sum()) / gap
    assert plain_atp.ld_corrupted == pytest.approx(ld_corrupted, abs=1e-4)
    scale = np.abs(expected["z"]).max()
    for name in "zqkv":
        np.testing.assert_allclose(
            getattr(plain_atp, name), expected[name], rtol=1e-3, atol=1e-5 * scale, err_msg=name
        )
    np.testing.assert_allclose(plain_atp.z_positions, positions, rtol=1e-3, atol=1e-5 * scale)
    assert plain_atp.z_star is plain_atp.z or np.array_equal(plain_atp.z_star, plain_atp.z)


def test_atp_matches_a_finite_difference_along_the_patch(setup, plain_atp, hf64):
    a, w = setup.answer_id, setup.wrong_id
    clean, corrupted = hf_values(hf64, setup.clean_ids), hf_values(hf64, setup.corrupted_ids)
    layer, head, eps = 2, 2, 1e-4
    cols = slice(head * 32, (head + 1) * 32)
    delta = (clean["z", layer] - corrupted["z", layer])[..., cols]
    up, _ = hf_run(hf64, setup.corrupted_ids, a, w, (layer, cols, eps * delta))
    down, _ = hf_run(hf64, setup.corrupted_ids, a, w, (layer, cols, -eps * delta))
    derivative = (up - down) / (2 * eps)
    gap = plain_atp.ld_clean - plain_atp.ld_corrupted
    assert plain_atp.z[layer, head] * gap == pytest.approx(derivative, rel=1e-3)


def frozen(model, ids, names):
    """Hooks that hold these activations at their values on ``ids`` (any batch size)."""
    values = run_hooks(model, ids, names)
    return [
        (n, lambda act, hook=None, v=values[n]: v.to(act.device, act.dtype).expand_as(act))
        for n in names
    ]


def test_qk_fix_is_exact_when_only_the_softmax_is_nonlinear(bundled, setup):
    # with the last MLP and the final norm's scale frozen, LD is affine in the last layer's
    # pattern: recomputing the pattern and linearising after it is exact
    hooks = frozen(bundled, setup.corrupted_ids, [mlp_out_hook(2), final_norm_scale_hook()])
    result = attribution_patching(bundled, setup, qk_fix=True, hooks=hooks)
    for which in ("q", "k"):
        exact = input_effects(bundled, setup, which, hooks=hooks, layers=[2])[2]
        np.testing.assert_allclose(getattr(result, f"{which}_star")[2], exact, atol=1e-5)
    exact_k = input_effects(bundled, setup, "k", hooks=hooks, layers=[2])[2]
    assert np.abs(result.k[2] - exact_k).max() > 0.01  # the linear estimate is not exact here
    np.testing.assert_allclose(result.v[2], result.v_star[2])  # no fix for v without GradDrop


def leaf(seen, name):
    """A hook that adds a zero leaf to the activation and keeps the leaf in ``seen``."""

    def hook(act, hook=None):
        seen[name] = torch.zeros_like(act, requires_grad=True)
        return act + seen[name]

    return hook


def test_grad_drop_gradients_match_detached_block_outputs(bundled, setup):
    leaves = {z_hook(layer): layer for layer in range(3)}
    run = gradient_run(bundled, setup, leaves, {}, grad_drop=True)
    assert set(run.dropped) == {1, 2}
    changed = 0.0
    for drop in (1, 2):
        seen: dict = {}
        detach = [
            (attn_out_hook(drop), lambda a, hook=None: a.detach()),
            (mlp_out_hook(drop), lambda a, hook=None: a.detach()),
        ]
        names = every_layer(z_hook, drop)
        logits = run_with_hooks(
            bundled, setup.corrupted_ids, [(n, leaf(seen, n)) for n in names] + detach, grad=True
        )
        ld = logits[0, -1, setup.answer_id] - logits[0, -1, setup.wrong_id]
        for name, grad in zip(
            names, torch.autograd.grad(ld, [seen[n] for n in names]), strict=True
        ):
            np.testing.assert_allclose(run.dropped[drop][name], grad, atol=1e-6)
            changed = max(changed, float((grad - run.grads[name]).abs().max()))
    assert changed > 1e-3


def test_grad_drop_combines_as_equation_11():
    atp = np.array([[1.0], [-2.0], [0.5]])
    dropped = {1: np.array([[3.0], [9.0], [9.0]]), 2: np.array([[-0.5], [4.0], [9.0]])}
    # node in layer 0: drop 0 -> 0, drop 1 -> 3, drop 2 -> -0.5; layer 1: -2, 0, 4; layer 2:
    # 0.5, 0.5, 0 (entries at or above the dropped layer are never read)
    expected = np.array([[3.5 / 2], [6.0 / 2], [1.0 / 2]])
    np.testing.assert_allclose(grad_drop_combine(atp, dropped), expected)
    nothing_cancels = {1: np.array([[1.0], [0], [0]]), 2: np.array([[1.0], [-2.0], [0]])}
    np.testing.assert_allclose(grad_drop_combine(atp, nothing_cancels), atp)


def test_patched_patterns_is_the_softmax_of_the_patched_logits():
    gen = torch.Generator().manual_seed(0)
    n, heads, kv, d = 5, 4, 2, 3
    q, q2 = torch.randn(n, heads, d, generator=gen), torch.randn(n, heads, d, generator=gen)
    k, k2 = torch.randn(n, kv, d, generator=gen), torch.randn(n, kv, d, generator=gen)
    mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
    scale = 0.7
    expand = lambda x: x.repeat_interleave(2, dim=1)
    scores = scale * torch.einsum("qhd,khd->hqk", q, expand(k)) + mask
    new = patched_patterns(scores, q, q2, k, k2, scale)
    for head in range(heads):
        logits = scale * q2[:, head] @ expand(k2)[:, head].T + mask
        torch.testing.assert_close(new[head], torch.softmax(logits.double(), -1))


def test_checking_the_top_heads_is_exact_patching(bundled, setup):
    result = attribution_patching(bundled, setup, qk_fix=False, verify_top=3)
    exact = head_effects(bundled, setup, baseline(bundled, setup))
    checked = ~np.isnan(result.verified)
    top = np.argsort(-np.abs(result.z_star).ravel(), kind="stable")[:3]
    assert sorted(np.flatnonzero(checked)) == sorted(top)
    np.testing.assert_allclose(result.verified[checked], exact[checked], atol=1e-5)
    np.testing.assert_allclose(result.best[checked], exact[checked], atol=1e-5)
    assert result.saturated.shape == (3, 4)


@pytest.mark.filterwarnings("ignore:A forward hook edited hook_scale")
def test_qk_fix_is_exact_on_a_gqa_rope_model(smollm2):
    # SmolLM2: 9 query heads read 3 key/value heads; q and k are rotated before the softmax
    from models.circuits import IOI

    setup = prepare(smollm2, IOI)
    hooks = frozen(smollm2, setup.corrupted_ids, [mlp_out_hook(29), final_norm_scale_hook()])
    result = attribution_patching(smollm2, setup, qk_fix=True, hooks=hooks)
    assert result.q.shape == (30, 9) and result.k.shape == result.v.shape == (30, 3)
    assert result.sharing(1) == (3, 4, 5)
    for which in ("q", "k"):
        exact = input_effects(smollm2, setup, which, hooks=hooks, layers=[29])[29]
        np.testing.assert_allclose(getattr(result, f"{which}_star")[29], exact, atol=1e-4)
    assert np.abs(result.k_star[29]).max() > 1e-3  # the key/value heads matter here
