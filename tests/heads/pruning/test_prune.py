"""Pruned checkpoints: the plan, removal and masking against zero-ablation, hand-counted
parameters, and the round trip through plain transformers and the app's own loader."""

import json

import numpy as np
import pytest
import torch
import transformers

from models.head import HeadGroups
from models.heads.pruning.export import prune_and_export, zip_directory
from models.heads.pruning.importance import corpus_losses
from models.heads.pruning.loss import corpus_tasks
from models.heads.pruning.prune import (
    PruneError,
    PrunePlan,
    apply_plan,
    family,
    n_parameters,
    plan_pruning,
    remove_groups,
    uniform_group_heads,
)
from models.heads.pruning.standalone import load_fresh
from models.model.forward import run_with_hooks
from models.model.loading import load
from models.model.resume import run_standalone
from models.model.spec import ModelSpec
from tests.heads.reference import ablation_hooks

TEXTS = (
    "def mean(values):\n    return sum(values) / len(values)\n",
    "import sys\nfor line in sys.stdin:\n    print(line.strip())\n",
)


def test_llama_plan_removes_the_same_number_of_whole_groups_per_layer():
    # 2 layers x 6 heads, 3 key/value groups of 2 query heads
    heads = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 4), (1, 5), (1, 0)]
    plan = plan_pruning("llama", 2, 6, 3, 8, heads)
    assert plan.removed == {0: (0,), 1: (2,)}
    assert plan.masked == ((0, 2), (0, 3), (1, 0))  # group 1 of layer 0 is whole but r = 1
    assert plan.groups_per_layer == 1 and "4 heads and 2 key/value heads" in plan.describe()
    one_layer = plan_pruning("llama", 2, 6, 3, 8, [(0, 2), (0, 3)])
    assert one_layer.removed == {} and one_layer.masked == ((0, 2), (0, 3))
    assert "not in every layer" in one_layer.describe()
    every = plan_pruning("llama", 1, 6, 3, 8, [(0, h) for h in range(6)])
    assert every.groups_per_layer == 2 and every.masked == ((0, 4), (0, 5))  # one group stays


def test_gpt2_plan_masks_and_bad_heads_are_refused():
    plan = plan_pruning("gpt2", 3, 4, 4, 32, [(2, 1), (0, 3), (2, 1)])
    assert plan.heads == ((0, 3), (2, 1)) and plan.masked == plan.heads and not plan.removed
    assert "cannot hold fewer heads" in plan.describe()
    with pytest.raises(PruneError, match=r"no head 3\.0"):
        plan_pruning("gpt2", 3, 4, 4, 32, [(3, 0)])


def test_uniform_groups_pick_the_least_important_group_of_each_layer():
    importance = np.array([[5, 5, 0, 1, 9, 9], [0, 0, 7, 7, 1, 1]], dtype=float)
    assert uniform_group_heads(importance, 3, 1) == [(0, 2), (0, 3), (1, 0), (1, 1)]


@pytest.fixture(scope="module")
def bundled_export(bundled, tmp_path_factory):
    tasks = corpus_tasks(bundled, TEXTS)
    heads = [(0, 1), (1, 3), (2, 0), (2, 3)]
    directory = tmp_path_factory.mktemp("pruned") / "bundled-pruned"
    report = prune_and_export(
        bundled.spec, heads, directory.parent, tasks, budget_bytes=None, name=directory.name
    )
    return tasks, heads, directory, report


def test_pruned_gpt2_loss_equals_the_ablation_estimate(bundled, bundled_export):
    tasks, heads, _directory, report = bundled_export
    clean, ablated = corpus_losses(bundled, tasks, [[], heads])
    assert report.loss_before == pytest.approx(clean, abs=1e-4)
    assert report.loss_after == pytest.approx(ablated, abs=1e-4)
    assert report.loss_after > report.loss_before


def test_gpt2_parameters_match_a_hand_count(bundled_export):
    _tasks, heads, _directory, report = bundled_export
    d_model, d_head, vocab, ctx, mlp = 128, 32, 2048, 128, 512
    layer = (
        2 * 2 * d_model
        + d_model * 3 * d_model
        + 3 * d_model
        + d_model * d_model
        + d_model
        + d_model * mlp
        + mlp
        + mlp * d_model
        + d_model
    )
    total = vocab * d_model + ctx * d_model + 3 * layer + 2 * d_model
    assert report.params_before == report.params_after == total == 873_600
    per_head = 3 * d_model * d_head + 3 * d_head + d_head * d_model  # q, k, v columns + c_proj rows
    assert report.params_effective == total - len(heads) * per_head


def test_gpt2_export_round_trips_through_plain_transformers_and_the_app(bundled, bundled_export):
    tasks, heads, directory, report = bundled_export
    model = transformers.AutoModelForCausalLM.from_pretrained(directory)
    for layer, head in heads:
        rows = model.transformer.h[layer].attn.c_proj.weight[head * 32 : (head + 1) * 32]
        assert torch.count_nonzero(rows) == 0
    want = run_with_hooks(bundled, tasks[0].ids, ablation_hooks(heads))
    torch.testing.assert_close(run_standalone(model, tasks[0].ids), want, atol=1e-4, rtol=0)
    app = load(ModelSpec(str(directory)))
    assert app.facts.n_heads == 4
    torch.testing.assert_close(run_with_hooks(app, tasks[0].ids), want, atol=1e-4, rtol=0)
    info = json.loads((directory / "pruning.json").read_text())
    assert (
        info["heads"] == [f"{layer}.{head}" for layer, head in sorted(heads)] and "report" in info
    )
    assert report.time_ratio > 0 and report.n_texts == 2
    archive = zip_directory(directory, budget_bytes=None)
    import zipfile

    names = zipfile.ZipFile(archive).namelist()
    assert (
        f"{directory.name}/model.safetensors" in names and f"{directory.name}/config.json" in names
    )


def smollm2_plan(heads, removed):
    return PrunePlan("llama", tuple(heads), removed, (), HeadGroups(9, 3), 64)


def test_smollm2_removing_one_group_equals_zero_ablating_its_three_heads(smollm2):
    ids = smollm2.bridge.to_tokens("The cat sat on the mat. The cat")
    heads = [(4, 3), (4, 4), (4, 5)]  # key/value group 1 of layer 4
    fresh = load_fresh(smollm2.spec)
    before = n_parameters(fresh)
    remove_groups(fresh, smollm2_plan(heads, {4: (1,)}), update_config=False)
    attn = fresh.model.layers[4].self_attn
    assert attn.q_proj.out_features == 6 * 64 and attn.k_proj.out_features == 2 * 64
    assert attn.o_proj.in_features == 6 * 64
    assert before - n_parameters(fresh) == 3 * 64 * 576 + 2 * 64 * 576 + 576 * 3 * 64
    want = run_with_hooks(smollm2, ids, ablation_hooks(heads))
    torch.testing.assert_close(run_standalone(fresh, ids), want, atol=1e-4, rtol=0)


def test_smollm2_one_group_checkpoint_is_masked_and_equals_ablation(smollm2, tmp_path):
    tasks = corpus_tasks(smollm2, ["The cat sat on the mat. The cat"])
    heads = [(4, 3), (4, 4), (4, 5)]
    report = prune_and_export(
        smollm2.spec, heads, tmp_path, tasks, budget_bytes=None, name="one-group"
    )
    assert report.plan.masked == tuple(heads) and not report.plan.removed
    assert report.params_after == report.params_before
    assert report.params_effective == report.params_before - 3 * 2 * 64 * 576 - 2 * 64 * 576
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "one-group")
    want = run_with_hooks(smollm2, tasks[0].ids, ablation_hooks(heads))
    torch.testing.assert_close(run_standalone(model, tasks[0].ids), want, atol=1e-4, rtol=0)


@pytest.mark.slow
def test_smollm2_uniform_group_removal_exports_a_smaller_stock_checkpoint(smollm2, tmp_path):
    tasks = corpus_tasks(smollm2, ["The cat sat on the mat. The cat"])
    heads = uniform_group_heads(np.arange(270.0).reshape(30, 9), 3, 1)  # group 0 of each layer
    report = prune_and_export(
        smollm2.spec, heads, tmp_path, tasks, budget_bytes=None, name="uniform"
    )
    assert report.plan.groups_per_layer == 1 and not report.plan.masked
    assert report.params_before - report.params_after == 30 * (2 * 3 * 64 * 576 + 2 * 64 * 576)
    assert report.loss_after == pytest.approx(corpus_losses(smollm2, tasks, [heads])[0], abs=1e-4)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "uniform")
    assert (model.config.num_attention_heads, model.config.num_key_value_heads) == (6, 2)
    app = load(ModelSpec(str(tmp_path / "uniform")))
    assert (app.facts.n_heads, app.facts.n_kv_heads, app.facts.d_head) == (6, 2, 64)


def test_bert_export_masks_heads_like_zeroing_their_context(minilm, tmp_path):
    ids = minilm.bridge.to_tokens("The cat sat on the mat.")
    heads = [(0, 2), (3, 11)]
    original = load_fresh(minilm.spec)

    def zero_context(layer_heads):
        def hook(_module, args):
            (hidden,) = args
            hidden = hidden.clone()
            for head in layer_heads:
                hidden[..., head * 32 : (head + 1) * 32] = 0.0
            return (hidden,)

        return hook

    handles = [
        original.encoder.layer[layer].attention.output.dense.register_forward_pre_hook(
            zero_context([h for other, h in heads if other == layer])
        )
        for layer in {layer for layer, _ in heads}
    ]
    with torch.no_grad():
        want = original(input_ids=ids).last_hidden_state
    for handle in handles:
        handle.remove()
    plan = plan_pruning(family(original), 6, 12, 12, 32, heads)
    masked = apply_plan(load_fresh(minilm.spec), plan)
    masked.save_pretrained(tmp_path / "minilm")
    reloaded = transformers.AutoModel.from_pretrained(tmp_path / "minilm")
    with torch.no_grad():
        got = reloaded(input_ids=ids).last_hidden_state
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert plan.masked == tuple(sorted(heads)) and not plan.removed
