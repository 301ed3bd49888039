"""Weight circuits against hand-built circuits and brute force: copying scores of identity and
negated OV circuits and of full vocab x vocab products, composition scores against
``d_model x d_model`` products (with their symmetry and sum identities), GQA weight sharing and
positional scores against plain transformers modules."""

import math

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from models.circuits.composition import composition_scores, head_matrices
from models.circuits.weight_circuits import (
    copying_score,
    ov_copying_score,
    positional_logits,
    preference,
    weight_data_correlation,
    weight_scores,
)
from models.model.spec import BUNDLED_DIR


def test_identity_ov_circuit_copies_and_its_negation_suppresses():
    basis, _ = torch.linalg.qr(torch.randn(10, 4, dtype=torch.float64))  # W_E, orthonormal
    gram = basis.T @ basis  # W_U W_E with tied W_U = W_E^T: the identity
    eye = torch.eye(4, dtype=torch.float64)
    assert ov_copying_score(eye, eye, gram) == pytest.approx(1.0)
    assert ov_copying_score(eye, -eye, gram) == pytest.approx(-1.0)
    assert ov_copying_score(eye, eye) == pytest.approx(1.0)


def test_small_eigenproblem_gives_the_full_circuit_score():
    gen = torch.Generator().manual_seed(1)
    shape = {"w_e": (12, 5), "w_u": (5, 12), "w_v": (5, 2), "w_o": (2, 5)}
    w = {
        name: torch.randn(*size, generator=gen, dtype=torch.float64) for name, size in shape.items()
    }
    full = (w["w_e"] @ w["w_v"] @ w["w_o"] @ w["w_u"]).numpy()  # vocab x vocab, rank 2
    expected = copying_score(np.linalg.eigvals(full))
    got = ov_copying_score(w["w_v"], w["w_o"], w["w_u"] @ w["w_e"])
    assert got == pytest.approx(expected, rel=1e-8)
    residual = copying_score(np.linalg.eigvals((w["w_v"] @ w["w_o"]).numpy()))
    assert ov_copying_score(w["w_v"], w["w_o"]) == pytest.approx(residual, rel=1e-8)


def random_heads(seed=0, d_model=6, d_head=3, shared_qk=False):
    """Two layers of two query heads, one key/value head per layer (GQA groups of 2)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(4, d_model, d_head, generator=gen, dtype=torch.float64)
    k = torch.randn(2, d_model, d_head, generator=gen, dtype=torch.float64)
    v = torch.randn(2, d_model, d_head, generator=gen, dtype=torch.float64)
    o = torch.randn(4, d_head, d_model, generator=gen, dtype=torch.float64)
    if shared_qk:  # W_Q = W_K: each QK matrix is symmetric
        q = k.repeat_interleave(2, dim=0)
    return q, k, v, o, np.array([0, 0, 1, 1]), np.array([0, 0, 1, 1])


def brute_force(q, k, v, o, kv_of):
    n = len(kv_of)
    ov = [v[kv_of[a]] @ o[a] for a in range(n)]
    qk = [q[b] @ k[kv_of[b]].T for b in range(n)]
    score = lambda a, b: float(
        torch.linalg.norm(a @ b) / (torch.linalg.norm(a) * torch.linalg.norm(b))
    )
    return ov, qk, score


def test_composition_matches_d_model_products_and_is_nan_within_a_layer():
    q, k, v, o, kv_of, layer = random_heads()
    got_q, got_k, got_v = composition_scores(q, k, v, o, kv_of, layer)
    ov, qk, score = brute_force(q, k, v, o, kv_of)
    for a in (0, 1):
        for b in (2, 3):
            assert got_q[a, b] == pytest.approx(score(ov[a], qk[b]), rel=1e-5)
            assert got_k[a, b] == pytest.approx(score(ov[a], qk[b].T), rel=1e-5)
            assert got_v[a, b] == pytest.approx(score(ov[a], ov[b]), rel=1e-5)
    for table in (got_q, got_k, got_v):
        assert np.isnan(table[2:, :]).all() and np.isnan(table[:, :2]).all()
        assert ((table[:2, 2:] > 0) & (table[:2, 2:] <= 1)).all()


def test_symmetric_qk_gives_equal_q_and_k_composition():
    q, k, v, o, kv_of, layer = random_heads(seed=3, shared_qk=True)
    got_q, got_k, _ = composition_scores(q, k, v, o, kv_of, layer)
    np.testing.assert_allclose(got_q[:2, 2:], got_k[:2, 2:], rtol=1e-5)


def test_composition_sums_over_receivers_and_ignores_scale():
    q, k, v, o, kv_of, layer = random_heads(seed=5)
    got_q, _, got_v = composition_scores(q, k, v, o, kv_of, layer)
    ov, qk, _ = brute_force(q, k, v, o, kv_of)
    for a in (0, 1):  # squared numerators add up to the norm against both receivers side by side
        numerators = [
            got_q[a, b] ** 2 * float(torch.linalg.norm(ov[a]) * torch.linalg.norm(qk[b])) ** 2
            for b in (2, 3)
        ]
        assert sum(numerators) == pytest.approx(
            float(torch.linalg.norm(ov[a] @ torch.cat([qk[2], qk[3]], dim=1))) ** 2, rel=1e-5
        )
    scaled = composition_scores(q, k, 3.0 * v, 0.5 * o, kv_of, layer)
    np.testing.assert_allclose(scaled[0], got_q, rtol=1e-5)
    np.testing.assert_allclose(scaled[2], got_v, rtol=1e-5)


def test_gqa_heads_read_their_groups_weights(smollm2):
    m = head_matrices(smollm2)
    assert m.kv_of[9 * 4 + 7] == 4 * 3 + 2 and m.q.shape[0] == 270 and m.k.shape[0] == 90
    attn = smollm2.bridge.original_model.model.layers[4]
    norm = attn.input_layernorm.weight.detach().double()
    w_k = attn.self_attn.k_proj.weight.detach().double().view(3, 64, 576).transpose(1, 2)
    torch.testing.assert_close(m.k[4 * 3 + 2], norm[:, None] * w_k[2])
    q, k, v, o = m.q[:18], m.k[:6], m.v[:6], m.o[:18]
    _, got_k, got_v = composition_scores(q, k, v, o, m.kv_of[:18], m.layer[:18])
    ov, qk, score = brute_force(q, k, v, o, m.kv_of[:18])
    for a, b in ((0, 9), (4, 13), (8, 17)):
        assert got_k[a, b] == pytest.approx(score(ov[a], qk[b].T), rel=1e-4)
        assert got_v[a, b] == pytest.approx(score(ov[a], ov[b]), rel=1e-4)


def causal_previous(logits):
    n = logits.shape[-1]
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    weights = torch.softmax(logits.masked_fill(mask, float("-inf")), dim=-1)
    rows = torch.arange(1, n)
    return weights[:, rows, rows - 1].mean(-1).numpy()


def test_learned_position_scores_match_plain_transformers(bundled):
    hf = AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, attn_implementation="eager").eval()
    scores = weight_scores(bundled)
    n, d = 64, 128
    with torch.no_grad():
        rows = hf.transformer.wte.weight.mean(0) + hf.transformer.wpe.weight[:n]
        for layer, block in enumerate(hf.transformer.h):
            qkv = block.attn.c_attn(block.ln_1(rows)).view(n, 3, 4, 32)
            logits = torch.einsum("qhd,khd->hqk", qkv[:, 0], qkv[:, 1]).double()
            scale = (
                1
                / math.sqrt(32)
                / ((layer + 1) if hf.config.scale_attn_by_inverse_layer_idx else 1)
            )
            np.testing.assert_allclose(
                scores.qk_prev[layer], causal_previous(scale * logits), atol=1e-5
            )
    assert scores.basis == "tokens" and scores.qk_prev[0, 3] > 0.9  # a previous-token head
    assert d == hf.config.n_embd


def test_rope_position_scores_match_plain_transformers(smollm2):
    from models.circuits.weight_circuits import _rotation

    hf = smollm2.bridge.original_model.model
    n, layer = 16, 5
    with torch.no_grad():
        x = hf.layers[layer].input_layernorm(
            hf.embed_tokens.weight.mean(0)[None, None].expand(1, n, -1)
        )
        attn = hf.layers[layer].self_attn
        q = attn.q_proj(x).view(1, n, 9, 64).transpose(1, 2)
        k = attn.k_proj(x).view(1, n, 3, 64).transpose(1, 2)
        cos, sin = hf.rotary_emb(x, torch.arange(n)[None])
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        logits = torch.einsum("hqd,hkd->hqk", q[0], k[0].repeat_interleave(3, dim=0)) * attn.scaling
    ours = positional_logits(smollm2, layer, n, _rotation(smollm2, n))
    torch.testing.assert_close(ours, logits.double(), atol=1e-4, rtol=1e-4)
    prev, *_ = preference(ours, causal=True)
    np.testing.assert_allclose(prev, causal_previous(logits.double()), atol=1e-6)


def test_weight_data_correlation_ignores_missing_heads():
    weight = np.array([[0.1, 0.5, np.nan], [0.9, 0.3, 0.7]])
    data = np.array([[0.2, 0.4, 0.8], [0.6, np.nan, 1.0]])
    found = weight_data_correlation(weight, data)
    assert found.n == 4
    assert found.pearson == pytest.approx(
        np.corrcoef([0.1, 0.5, 0.9, 0.7], [0.2, 0.4, 0.6, 1.0])[0, 1]
    )
    assert found.spearman == pytest.approx(0.8)


def test_encoder_weights_use_the_residual_basis(minilm):
    scores = weight_scores(minilm)
    assert scores.basis == "residual" and scores.copying.shape == (6, 12)
    assert np.all(np.abs(scores.copying) <= 1 + 1e-9) and np.isfinite(scores.qk_prev).all()
    assert scores.qk_prev.max() > 0.9  # BERT-style models have previous-token heads
