"""Ranks, and where a quantity does not apply."""

from types import SimpleNamespace

import numpy as np

from models.heads.atlas.metrics import (
    METRIC_NAMES,
    METRICS,
    UNCERTAINTY,
    LayerMechanism,
    Measure,
    applies_grid,
    attention_from,
    not_applicable,
)


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


def test_layer_kinds_and_learned_sinks_from_the_config():
    config = SimpleNamespace(layer_types=["linear_attention", "full_attention", "linear_attention"])
    names = ["model.layers.1.self_attn.sinks", "model.layers.1.self_attn.q_proj.weight"]
    layers = attention_from(config, names, 3)
    assert [layer.kind for layer in layers] == ["linear", "softmax", "linear"]
    assert [layer.learned_sink for layer in layers] == [False, True, False]
    assert attention_from(None, [], 2) == [LayerMechanism(), LayerMechanism()]


def test_what_applies_where():
    linear, sink = LayerMechanism(kind="linear"), LayerMechanism(learned_sink=True)
    assert not_applicable("previous_token", linear) and not_applicable("qk_previous", linear)
    assert not_applicable("ov_copying", linear) is None
    assert not_applicable("zero_ablation", linear) is None
    assert not_applicable("entropy", sink) and not_applicable("distance", sink)
    assert not_applicable("sink", sink) is None
    grid = applies_grid("entropy", [LayerMechanism(), linear, sink], 2)
    assert grid.tolist() == [[True, True], [False, False], [False, False]]
