"""Path patching against a hand-written two-step implementation on a plain Hugging Face GPT-2
(forward hooks on ``c_proj``, ``mlp`` and ``c_attn``), senders that cannot reach the receiver,
GQA receivers on SmolLM2, and the edge estimates where they must be exact."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from models.circuits import attribution_runs, copying_task, edge_estimates, path_patching, prepare
from models.circuits.edges import EdgeEstimates
from models.circuits.graph import graph_from_estimates, graph_from_paths
from models.circuits.paths import PathResult
from models.head import Head
from models.model.forward import final_norm_scale_hook, mlp_out_hook, run_hooks
from models.model.spec import BUNDLED_DIR

D_HEAD, D_MODEL = 32, 128


@pytest.fixture(scope="module")
def setup(bundled):
    return prepare(bundled, copying_task(bundled))


@pytest.fixture(scope="module")
def hf_gpt2():
    return AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, attn_implementation="eager").eval()


def hf_pass(hf, ids, z=None, mlp=None, qkv=None):
    """One pass of a plain HF GPT-2: LD inputs (logits) and every block's head outputs, MLP
    output and q|k|v, optionally replaced: ``z``/``mlp`` = {layer: tensor},
    ``qkv`` = {layer: tensor}."""
    seen, handles = {}, []
    for layer, block in enumerate(hf.transformer.h):

        def pre(_m, args, layer=layer):
            seen["z", layer] = args[0].detach()
            return (z[layer],) if z and layer in z else None

        def after_mlp(_m, _a, out, layer=layer):
            seen["mlp", layer] = out.detach()
            return mlp[layer] if mlp and layer in mlp else None

        def after_qkv(_m, _a, out, layer=layer):
            seen["qkv", layer] = out.detach()
            return qkv[layer] if qkv and layer in qkv else None

        handles += [
            block.attn.c_proj.register_forward_pre_hook(pre),
            block.mlp.register_forward_hook(after_mlp),
            block.attn.c_attn.register_forward_hook(after_qkv),
        ]
    try:
        with torch.no_grad():
            logits = hf(ids).logits
    finally:
        for handle in handles:
            handle.remove()
    return logits[0, -1], seen


@pytest.fixture(scope="module")
def hf_runs(setup, hf_gpt2):
    """The plain model's clean and corrupted passes: LDs and activations."""
    a, w = setup.answer_id, setup.wrong_id
    clean_logits, clean = hf_pass(hf_gpt2, setup.clean_ids)
    logits, corrupted = hf_pass(hf_gpt2, setup.corrupted_ids)
    return float(clean_logits[a] - clean_logits[w]), float(logits[a] - logits[w]), clean, corrupted


def hf_path_effect(hf, setup, runs, sender, receiver, which, mlps):
    """Two-step path patching by hand: heads (and for ``direct`` MLPs) frozen at their
    corrupted outputs but the sender's clean one, the receiver's input read; then the corrupted
    run with that input."""
    ld_clean, ld_corrupted, clean, corrupted = runs
    frozen = {layer: corrupted["z", layer].clone() for layer in range(3)}
    cols = slice(sender.index * D_HEAD, (sender.index + 1) * D_HEAD)
    frozen[sender.layer][..., cols] = clean["z", sender.layer][..., cols]
    mlp = {layer: corrupted["mlp", layer] for layer in range(3)} if mlps == "direct" else None
    _, step = hf_pass(hf, setup.corrupted_ids, z=frozen, mlp=mlp)
    offset = "qkv".index(which) * D_MODEL + receiver.index * D_HEAD
    inputs = corrupted["qkv", receiver.layer].clone()
    inputs[..., offset : offset + D_HEAD] = step["qkv", receiver.layer][
        ..., offset : offset + D_HEAD
    ]
    patched, _ = hf_pass(hf, setup.corrupted_ids, qkv={receiver.layer: inputs})
    a, w = setup.answer_id, setup.wrong_id
    return (float(patched[a] - patched[w]) - ld_corrupted) / (ld_clean - ld_corrupted)


@pytest.mark.parametrize(
    ("which", "mlps"), [("k", "recomputed"), ("q", "direct"), ("v", "recomputed")]
)
def test_path_patching_matches_hand_written_hooks(bundled, setup, hf_gpt2, hf_runs, which, mlps):
    receiver = Head(2, 2)
    result = path_patching(bundled, setup, receiver, which, mlps=mlps)
    expected = np.zeros((3, 4))
    for layer in range(2):
        for head in range(4):
            expected[layer, head] = hf_path_effect(
                hf_gpt2, setup, hf_runs, Head(layer, head), receiver, which, mlps
            )
    np.testing.assert_allclose(result.effects, expected, atol=2e-4)
    if which == "k" and mlps == "recomputed":  # the induction head's key reads 0.3 via MLPs
        assert result.effects[0, 3] < -0.5


def test_senders_in_the_same_or_a_later_layer_have_no_path(bundled, setup, hf_gpt2, hf_runs):
    receiver = Head(1, 2)
    result = path_patching(bundled, setup, receiver, "k")
    for sender in (Head(1, 0), Head(1, 3), Head(2, 2)):
        assert hf_path_effect(hf_gpt2, setup, hf_runs, sender, receiver, "k", "recomputed") == 0.0
        assert result.effects[sender] == 0.0
    assert np.abs(result.effects[0]).max() > 0  # earlier senders do reach it


def test_gqa_receivers_share_their_key_value_head(smollm2):
    from models.circuits import IOI

    setup = prepare(smollm2, IOI)
    first = path_patching(smollm2, setup, Head(1, 3), "k", mlps="direct")
    second = path_patching(smollm2, setup, Head(1, 5), "k", mlps="direct")
    assert first.index == second.index == 1 and first.shared_by == (3, 4, 5)
    np.testing.assert_array_equal(first.effects, second.effects)
    assert np.abs(first.effects[0]).max() > 0 and not first.effects[1:].any()


def frozen(model, ids, names):
    values = run_hooks(model, ids, names)
    return [
        (n, lambda act, hook=None, v=values[n]: v.to(act.device, act.dtype).expand_as(act))
        for n in names
    ]


@pytest.mark.parametrize("mlps", ["recomputed", "direct"])
def test_edge_estimates_are_exact_when_only_the_softmax_is_nonlinear(bundled, setup, mlps):
    # last MLP and final norm scale frozen: LD is affine in the last layer's patterns and values,
    # so recomputing the receiver's pattern and linearising after it is exact
    hooks = frozen(bundled, setup.corrupted_ids, [mlp_out_hook(2), final_norm_scale_hook()])
    runs = attribution_runs(bundled, setup, qk_fix=True, hooks=hooks)
    estimates = edge_estimates(bundled, runs, setup, mlps=mlps, layers=[2])
    for receiver in (Head(2, 1), Head(2, 2)):
        for which in ("q", "k", "v"):
            exact = path_patching(bundled, setup, receiver, which, mlps=mlps, hooks=hooks)
            np.testing.assert_allclose(estimates.into(receiver, which), exact.effects, atol=1e-5)
    assert not estimates.q[1].any()  # layer 1 was not asked for


def test_graph_from_estimates_thresholds_and_shares_key_value_edges():
    q = np.zeros((2, 4, 2, 4))
    k = np.zeros((2, 2, 2, 4))
    q[1, 3, 0, 1] = 0.3
    k[1, 1, 0, 2] = -0.5  # into key/value head 1 of layer 1, read by query heads 2 and 3
    estimates = EdgeEstimates(q=q, k=k, v=np.zeros_like(k), qk_fix=True, group=2)
    graph = graph_from_estimates(estimates, min_weight=0.1)
    assert [e.label() for e in graph.edges] == [
        "0.2 -> 1.2 (k, shared by 1.2, 1.3) -0.500",
        "0.2 -> 1.3 (k, shared by 1.2, 1.3) -0.500",
        "0.1 -> 1.3 (q) +0.300",
    ]
    assert graph.above(0.4).nodes() == [Head(0, 2), Head(1, 2), Head(1, 3)]
    assert graph.receivers() == [Head(1, 2), Head(1, 3)]
    assert graph_from_estimates(estimates, min_weight=0.6).edges == ()


def test_graph_from_paths_keeps_nonzero_senders():
    effects = np.zeros((3, 4))
    effects[0, 1], effects[1, 0] = 0.02, -0.2
    result = PathResult(Head(2, 3), "v", 1, (2, 3), effects, 1.0, 0.0)
    graph = graph_from_paths([result], 3, 4)
    assert [(str(e.sender), str(e.receiver), e.weight) for e in graph.edges] == [
        ("1.0", "2.2", -0.2),
        ("1.0", "2.3", -0.2),
        ("0.1", "2.2", 0.02),
        ("0.1", "2.3", 0.02),
    ]
    assert len(graph.above(0.1).edges) == 2 and graph.strongest(1)[0].weight == -0.2
