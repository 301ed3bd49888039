"""Removing one part, against plain ``transformers`` passes with the part removed by hooks.

The reference removes the part from what the head's query (or key) projection reads, with the
norm and QK-norm scales frozen at the clean pass's values (or left to the model's own modules),
and records the logits and weights its eager attention then computes.
"""

from __future__ import annotations

import numpy as np
import pytest

from models.circuits.why import split
from models.circuits.why_effects import (
    free_changes,
    part_effects,
    removed_row,
    top_parts,
    weight_effect,
)
from models.circuits.why_keep import keep
from models.head import Head
from tests.circuits.why_reference import Edit, Reference

TOL = 1e-5
HEAD = Head(2, 1)
# (model, part): a head's output and an MLP's; Gemma's heads pass its sandwich norm first
PARTS = [
    ("bundled", "1.2"),
    ("bundled", "mlp.0"),
    ("qwen3_qk_norm", "1.3"),
    ("qwen3_qk_norm", "mlp.1"),
    ("gemma2_softcap", "mlp.0"),
]


def part_value(ref: Reference, part: str):
    if part.startswith("mlp."):
        return ref.mlp_part(int(part.split(".")[1]))
    layer, head = (int(x) for x in part.split("."))
    return ref.head_part(layer, head)


@pytest.mark.parametrize(("name", "part"), PARTS)
def test_removal_with_frozen_scales_moves_the_score_by_the_row_or_column_sum(why_cases, name, part):
    model, ref, ids = why_cases[name]
    n = ids.shape[1]
    query, key = n - 1, n - 4
    clean = ref.run(ids)
    raw = ref.raw(clean, HEAD.layer, HEAD.index)
    row_scale = float(raw[query, : query + 1].abs().max())
    kept = keep(model, ids, HEAD)
    cell = split(kept, query, key)
    for side, positions in (("query", [query]), ("key", list(range(n)))):
        removed = ref.run(ids, Edit(HEAD.layer, side, part_value(ref, part), positions))
        change = float(ref.raw(removed, HEAD.layer, HEAD.index)[query, key] - raw[query, key])
        effect = weight_effect(kept, cell, part, side)
        totals = cell.query_totals if side == "query" else cell.key_totals
        names = cell.query_parts if side == "query" else cell.key_parts
        assert effect.frozen == -totals[names.index(part)]
        assert abs(change - effect.frozen) <= TOL * row_scale, (side, change, effect.frozen)
        assert abs(effect.frozen) > 1e-3 * row_scale  # the part matters: the check can fail
        # the softmax counterfactual: the whole row recomputed, not linearised
        weights = removed[HEAD.layer]["weights"][0, HEAD.index, query]
        ours = kept.terms.weights(removed_row(kept, query, part, side), query)
        np.testing.assert_allclose(ours.numpy(), weights.numpy(), atol=TOL)
        assert effect.weight_removed == pytest.approx(float(weights[key]), abs=TOL)
        gained = (weights - clean[HEAD.layer]["weights"][0, HEAD.index, query]).numpy()
        for gainer, change_of_weight in effect.gainers:
            assert change_of_weight == pytest.approx(gained[gainer], abs=TOL)
            assert change_of_weight >= np.sort(gained)[-len(effect.gainers)] - TOL


@pytest.mark.parametrize(("name", "part"), PARTS)
def test_removal_with_free_scales_is_the_models_own_norm(why_cases, name, part):
    model, ref, ids = why_cases[name]
    n = ids.shape[1]
    query, key = n - 1, n - 4
    raw = ref.raw(ref.run(ids), HEAD.layer, HEAD.index)
    kept = keep(model, ids, HEAD)
    cell = split(kept, query, key)
    parts = [(part, "query"), (part, "key")]
    free = free_changes(model, kept, cell, parts)
    for (_, side), ours in zip(parts, free, strict=True):
        positions = [query] if side == "query" else list(range(n))
        edit = Edit(HEAD.layer, side, part_value(ref, part), positions, frozen=False)
        removed = ref.raw(ref.run(ids, edit), HEAD.layer, HEAD.index)
        expected = float(removed[query, key] - raw[query, key])
        assert ours == pytest.approx(expected, abs=TOL * float(raw[query].abs().max()))


def test_frozen_and_free_differ_where_a_norm_rescales(why_cases):
    model, _, ids = why_cases["qwen3_qk_norm"]
    kept = keep(model, ids, HEAD)
    cell = split(kept, ids.shape[1] - 1, 3)
    effects = part_effects(model, kept, cell, k=4)
    assert [(e.part, e.side) for e in effects] == top_parts(cell, 4)
    gaps = [abs(e.frozen - e.free) for e in effects if e.free is not None]
    assert max(gaps) > 1e-2  # QK-norm and RMSNorm recompute their scales: not the same number


def test_a_post_norm_model_reads_its_stream_without_a_norm_of_its_own(why_cases):
    model, _, ids = why_cases["minilm"]
    kept = keep(model, ids, Head(3, 2))
    cell = split(kept, 1, 9)  # a key after the query
    effects = part_effects(model, kept, cell, k=3)
    for effect in effects:
        assert effect.free == pytest.approx(effect.frozen, abs=1e-5)
