"""Ranks, and where a quantity does not apply."""

import numpy as np

from models.heads.atlas.metrics import (
    METRIC_NAMES,
    METRICS,
    UNCERTAINTY,
    Measure,
    applies_grid,
    not_applicable,
    variant_note,
)
from models.model.variants import LayerVariant


def test_ranks_by_hand_with_ties_and_gaps():
    values = np.array([[0.5, 0.9, np.nan], [0.9, 0.1, 0.7]])
    applies = np.array([[True, True, True], [True, True, False]])
    ranks = Measure(values, None, applies).ranks()
    # ranked: 0.9, 0.9 (tied first), 0.5, 0.1; 1.2 does not apply, 0.2 was not measured
    assert ranks.tolist() == [[3, 1, 0], [1, 4, 0]]


def test_every_metric_is_described_once():
    assert set(METRICS) == set(METRIC_NAMES)
    assert all(info.source in UNCERTAINTY for info in METRICS.values())
    twins = {name: info.twin for name, info in METRICS.items() if info.twin}
    assert twins == {"ov_copying": "induction", "qk_previous": "previous_token"}


def test_what_applies_where():
    plain = LayerVariant("softmax", 2)
    linear, sink = LayerVariant("linear", 2), LayerVariant("sliding", 2, window=6, sinks=True)
    assert not_applicable("previous_token", linear) and not_applicable("qk_previous", linear)
    assert not_applicable("ov_copying", linear) is None
    assert not_applicable("zero_ablation", linear) is None
    assert not_applicable("entropy", sink) is None and not_applicable("distance", sink) is None
    assert "sink included" in variant_note("entropy", sink)
    assert "keys only" in variant_note("distance", sink)
    assert variant_note("entropy", plain) is None and variant_note("sink", sink) is None
    grid = applies_grid("entropy", [plain, linear, sink], 2)
    assert grid.tolist() == [[True, True], [False, False], [True, True]]
