"""KV-cache memory and attention FLOPs against hand numbers and a direct count."""

import numpy as np
import pytest

from models.classroom import costs
from models.classroom.costs import AttentionConfig, attention_flops, kv_cache_bytes

LLAMA7 = costs.PRESETS["Llama-2-7B-like (MHA)"]
KIB, GIB = 1024, 1024**3


def test_kv_cache_llama2_7b_like():
    assert kv_cache_bytes(1, LLAMA7, bytes_per_element=2) == 512 * KIB
    assert kv_cache_bytes(4096, LLAMA7, batch=1, bytes_per_element=2) == 2 * GIB
    assert costs.human_bytes(512 * KIB) == "512.00 KiB"
    assert costs.human_bytes(2 * GIB) == "2.00 GiB"


def test_kv_cache_gqa_is_a_quarter_and_mqa_a_thirty_second():
    gqa = AttentionConfig(32, 4096, 32, 8, 128)
    assert kv_cache_bytes(4096, gqa) * 4 == kv_cache_bytes(4096, LLAMA7)
    mqa = costs.PRESETS["MQA example (1 KV head)"]
    assert kv_cache_bytes(4096, mqa) * 32 == kv_cache_bytes(4096, LLAMA7)
    big = costs.PRESETS["70B-like (GQA, 8 KV heads)"]
    assert kv_cache_bytes(1, big) == 2 * 80 * 8 * 128 * 2  # 320 KiB per token


def _matmul(a_rows, inner, b_cols):
    """Multiply-adds of an explicit triple loop for (a_rows x inner) @ (inner x b_cols)."""
    count = 0
    for _ in range(a_rows):
        for _ in range(b_cols):
            for _ in range(inner):
                count += 1
    return count


def direct_count(n, d_model, h, g, d_head):
    """Multiply-adds of one attention layer written as loops, head by head."""
    mac = 0
    mac += _matmul(n, d_model, h * d_head)  # X W_Q
    mac += 2 * _matmul(n, d_model, g * d_head)  # X W_K, X W_V
    for _ in range(h):
        mac += _matmul(n, d_head, n)  # q k^T for one head
        mac += _matmul(n, n, d_head)  # A v for one head
    mac += _matmul(n, h * d_head, d_model)  # concat(z) W_O
    return 2 * mac


@pytest.mark.parametrize(
    "n, d_model, h, g, d_head", [(3, 4, 2, 2, 2), (5, 8, 4, 4, 2), (3, 4, 4, 2, 1), (4, 6, 2, 1, 3)]
)
def test_flops_formula_matches_a_direct_count(n, d_model, h, g, d_head):
    cfg = AttentionConfig(1, d_model, h, g, d_head)
    assert sum(attention_flops(n, cfg).values()) == direct_count(n, d_model, h, g, d_head)
    if g == h and h * d_head == d_model:
        assert costs.textbook_flops(n, d_model) == direct_count(n, d_model, h, g, d_head)


def test_flops_on_arrays_and_crossover():
    cfg = AttentionConfig(1, 64, 4, 4, 16)
    lengths = np.array([10, 100])
    linear, quad = costs.linear_and_quadratic(lengths, cfg)
    expected = [costs.textbook_flops(int(n), 64) for n in lengths]
    np.testing.assert_array_equal(linear + quad, expected)
    assert costs.crossover_length(cfg) == 128  # 2 d_model for MHA
    gqa = AttentionConfig(1, 512, 8, 2, 64)
    n = int(costs.crossover_length(gqa))
    linear, quad = costs.linear_and_quadratic(n, gqa)
    assert linear == quad


def test_human_units_and_lengths():
    assert costs.human_flops(2.5e12) == "2.50 TFLOP"
    assert costs.human_flops(3.2e9) == "3.20 GFLOP"
    assert costs.human_flops(12) == "12 FLOP"
    assert costs.human_bytes(100) == "100 B"
    lengths = costs.sequence_lengths()
    assert lengths[0] == 16 and lengths[-1] == 131_072 and np.all(np.diff(lengths) > 0)


def test_config_problems():
    assert AttentionConfig(1, 8, 6, 4, 2).problems()
    assert AttentionConfig(1, 8, 0, 1, 2).problems()
    assert not LLAMA7.problems()
