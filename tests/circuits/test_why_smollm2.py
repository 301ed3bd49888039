"""The exact QK split on SmolLM2 (RoPE, GQA, RMSNorm, 30 layers), against plain transformers."""

from __future__ import annotations

import numpy as np
import pytest

from models.circuits.why import part_head, split
from models.circuits.why_bands import band_split
from models.circuits.why_effects import removed_row, weight_effect
from models.circuits.why_keep import keep
from models.head import Head
from models.model.forward import tokenize
from tests.circuits.conftest import reference
from tests.circuits.why_reference import Edit

pytestmark = pytest.mark.slow

PROMPT = (
    "Mr. Dursley was the director of a firm called Grunnings, which made drills. "
    "He was a big, beefy man. Mr. Dursley was the director of a firm called"
)
TOL = 1e-5


@pytest.fixture(scope="module")
def smol(smollm2):
    ref = reference(smollm2.spec.path_or_name, "llama")
    ids, _ = tokenize(smollm2, PROMPT)
    return smollm2, ref, ids, ref.run(ids)


@pytest.mark.parametrize("head", [Head(18, 7), Head(29, 2), Head(3, 0)])
def test_pairs_add_up_to_the_reference_logit(smol, head):
    model, ref, ids, records = smol
    raw = ref.raw(records, head.layer, head.index)
    kept = keep(model, ids, head)
    n = ids.shape[1]
    assert len(kept.key.names) == 1 + head.layer * (model.facts.n_heads + 1)  # embed, heads, MLPs
    for query, key in [(n - 1, 0), (n - 1, n - 2), (n - 1, 14), (20, 19)]:
        cell = split(kept, query, key)
        row_scale = float(raw[query, : query + 1].abs().max())
        assert abs(cell.total - float(raw[query, key])) <= TOL * row_scale, (query, key)
        bands = band_split(kept, query, key)
        assert bands.totals.sum() == pytest.approx(cell.total, abs=1e-9 * row_scale)
        assert len(bands.labels) == model.facts.d_head // 2


def test_removing_a_head_part_with_frozen_scales(smol):
    model, ref, ids, records = smol
    head = Head(18, 7)
    n = ids.shape[1]
    query, key = n - 1, 15
    raw = ref.raw(records, head.layer, head.index)
    kept = keep(model, ids, head)
    cell = split(kept, query, key)
    heads = [i for i, name in enumerate(cell.query_parts) if part_head(name) is not None]
    strongest = max(heads, key=lambda i: abs(cell.query_totals[i]))
    part = cell.query_parts[strongest]  # the earlier head whose output moves the query most
    value = ref.head_part(*part_head(part))
    for side, positions in (("query", [query]), ("key", list(range(n)))):
        removed = ref.run(ids, Edit(head.layer, side, value, positions))
        change = float(ref.raw(removed, head.layer, head.index)[query, key] - raw[query, key])
        effect = weight_effect(kept, cell, part, side)
        row_scale = float(raw[query].abs().max())
        assert abs(change - effect.frozen) <= TOL * row_scale
        assert side == "key" or abs(effect.frozen) > 1e-2 * row_scale
        weights = removed[head.layer]["weights"][0, head.index, query].numpy()
        ours = kept.terms.weights(removed_row(kept, query, part, side), query).numpy()
        np.testing.assert_allclose(ours, weights, atol=TOL)
