"""The exact split of one attention score, against plain ``transformers`` on the same weights.

Every check compares with :mod:`tests.circuits.why_reference`: a fresh Hugging Face model whose
eager attention records the query and key it received. Tolerances are relative to the row's
scale (the largest ``|logit|`` the query sees), as float32 activations allow.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.circuits import why_keep
from models.circuits.why import CellError, PartPair, part_group, part_head, part_words, split
from models.circuits.why_keep import keep, keep_cost
from models.head import Head
from tests.circuits.why_reference import Reference

TOL = 1e-5


def check_cells(model, ref: Reference, ids, head: Head, cells) -> None:
    """The pairs add up to the reference logit, and the split's score and weight are the
    reference's, at each (query, key) of ``cells``."""
    records = ref.run(ids)
    raw = ref.raw(records, head.layer, head.index)
    weights = records[head.layer]["weights"][0, head.index]
    kept = keep(model, ids, head)
    cells = [(query, key) for query, key in cells if weights[query, key] > 0]
    assert len(cells) >= 3
    for query, key in cells:
        cell = split(kept, query, key)
        seen = weights[query] > 0
        row_scale = float(raw[query][seen].abs().max())
        assert abs(cell.total - float(raw[query, key])) <= TOL * row_scale, (query, key)
        assert abs(cell.score - float(raw[query, key])) <= TOL * row_scale
        assert cell.weight == pytest.approx(float(weights[query, key]), abs=TOL)
        assert cell.row_scale == pytest.approx(row_scale, rel=1e-4)
        assert cell.pairs.shape == (len(cell.query_parts), len(cell.key_parts))


@pytest.mark.parametrize("name", ["bundled", "qwen3_qk_norm", "gemma2_softcap"])
def test_pairs_add_up_to_the_reference_score_on_causal_models(why_cases, name):
    model, ref, ids = why_cases[name]
    n = ids.shape[1]
    for layer in range(model.facts.n_layers):
        head = Head(layer, (layer + 1) % model.facts.n_heads)
        cells = [(n - 1, 0), (n - 1, n - 3), (n - 1, n - 8), (n - 2, n - 2), (5, 1)]
        check_cells(model, ref, ids, head, cells)


def test_pairs_add_up_on_a_bidirectional_model_with_keys_after_the_query(why_cases):
    model, ref, ids = why_cases["minilm"]
    n = ids.shape[1]
    for head in (Head(0, 3), Head(3, 7), Head(5, 11)):
        check_cells(model, ref, ids, head, [(2, n - 1), (2, 9), (n - 1, 0), (4, 4)])


def test_parts_are_named_as_the_app_names_them(why_cases):
    model, _, ids = why_cases["bundled"]
    cell = split(keep(model, ids, Head(2, 1)), 10, 3)
    heads = [f"{layer}.{h}" for layer in range(2) for h in range(4)]
    expected = ["embed", "pos_embed", *heads[:4], "b_O.0", "mlp.0", *heads[4:], "b_O.1"]
    assert list(cell.query_parts) == [*expected, "mlp.1", "b_ln1.2", "b_Q"]
    assert list(cell.key_parts) == [*expected, "mlp.1", "b_ln1.2", "b_K"]
    minilm, _, ids = why_cases["minilm"]
    names = split(keep(minilm, ids, Head(1, 0)), 0, 1).key_parts
    assert names[:4] == ("embed", "pos_embed", "type_embed", "b_ln_embed")
    assert {"b_ln1.0", "b_ln2.0", "mlp.0", "0.11"} <= set(names)


def test_gemma2_soft_cap_is_its_own_step(why_cases):
    model, ref, ids = why_cases["gemma2_softcap"]
    records = ref.run(ids)
    head, query = Head(1, 2), ids.shape[1] - 1
    assert records[1]["softcap"] == 5.0
    raw = ref.raw(records, 1, 2)[query]
    capped = 5.0 * torch.tanh(raw / 5.0)
    weights = torch.softmax(capped, dim=-1)  # layer 1 is a global layer: every key is seen
    np.testing.assert_allclose(weights, records[1]["weights"][0, 2, query], atol=1e-6)
    key = int(raw.abs().argmax())
    cell = split(keep(model, ids, head), query, key)
    assert cell.softcap == 5.0
    assert cell.capped(cell.total) == pytest.approx(float(capped[key]), abs=TOL * 5.0)
    assert abs(cell.total - cell.capped(cell.total)) > 1.0  # the cap changed this logit


def test_a_key_the_query_never_sees_is_refused(why_cases):
    model, _, ids = why_cases["bundled"]
    kept = keep(model, ids, Head(0, 0))
    with pytest.raises(CellError, match="never sees"):
        split(kept, 3, 7)
    with pytest.raises(CellError, match="outside"):
        split(kept, ids.shape[1], 0)
    gemma, _, gemma_ids = why_cases["gemma2_softcap"]
    local = keep(gemma, gemma_ids, Head(0, 0))  # layer 0 slides a window of 8
    with pytest.raises(CellError, match="never sees"):
        split(local, 20, 10)


def test_part_words_and_heads():
    assert part_words("1.2") == "head 1.2's output" and part_head("1.2") == Head(1, 2)
    assert part_words("mlp.3") == "MLP 3's output" and part_head("mlp.3") is None
    assert part_words("b_ln1.2") == "the bias of layer 2's first norm"
    pair = PartPair("embed", "1.2", 1.94)
    assert pair.words() == "head 1.2's output at the key × the token embedding at the query: +1.94"


@pytest.mark.parametrize("name", ["bundled", "minilm", "qwen3_qk_norm"])
def test_the_price_bounds_what_the_pass_keeps(why_cases, name):
    model, _, ids = why_cases[name]
    layer = model.facts.n_layers - 1
    kept = keep(model, ids, Head(layer, 0))
    cost = keep_cost(model, ids.shape[1], layer)
    sources = {id(g.source): g.source.nbytes for g in kept.stream.groups}
    held = sum(sources.values()) + kept.query_parts.nbytes + kept.key_parts.nbytes
    assert held <= cost.peak_bytes
    assert len(kept.query.names) <= 6 + layer * (model.facts.n_heads + 4)
    assert cost.forward_passes == 1 and cost.seconds > 0
    longer = keep_cost(model, 4 * ids.shape[1], layer)
    assert longer.peak_bytes > cost.peak_bytes and longer.seconds > cost.seconds


@pytest.mark.parametrize("name", ["bundled", "qwen3_qk_norm"])
def test_parts_kept_a_block_of_positions_at_a_time_are_the_whole_prompts(
    why_cases, name, monkeypatch
):
    model, _, ids = why_cases[name]
    monkeypatch.setattr(why_keep, "POSITION_BLOCK", 3)
    kept = keep(model, ids, Head(1, 0))
    assert ids.shape[1] > 2 * why_keep.POSITION_BLOCK
    for side, parts in ((kept.query, kept.query_parts), (kept.key, kept.key_parts)):
        whole = side.at(slice(None), torch.float32)
        assert parts.shape == whole.shape
        # the same float32 sums, only blocked differently by the matrix product
        assert (parts - whole).abs().max() <= 1e-6 * whole.abs().max()


def test_each_part_is_drawn_in_its_group():
    groups = {
        "embed": "embeddings",
        "pos_embed": "embeddings",
        "type_embed": "embeddings",
        "b_ln_embed": "biases",
        "1.2": "heads",
        "mlp.3": "MLPs",
        "b_O.0": "biases",
        "b_ln1.1": "biases",
        "b_Q": "biases",
        "alibi": "biases",
    }
    assert {name: part_group(name) for name in groups} == groups
