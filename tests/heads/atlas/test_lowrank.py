"""Principal components against ``torch.linalg.svd`` of the same matrix, and the top-loading
tokens against a brute-force search."""

import numpy as np
import torch

from models.heads.atlas.lowrank import Moments, TopLoadings, principal_components


def vectors(seed: int, n: int = 60, heads: int = 3, d: int = 5) -> torch.Tensor:
    """``pos head d`` vectors with a clear order of variances and an offset mean."""
    gen = torch.Generator().manual_seed(seed)
    scale = torch.tensor([5.0, 3.0, 2.0, 1.0, 0.5])[:d]
    mixing = torch.linalg.qr(torch.randn(heads, d, d, generator=gen, dtype=torch.float64))[0]
    raw = torch.randn(n, heads, d, generator=gen, dtype=torch.float64) * scale
    return torch.einsum("phd,hed->phe", raw, mixing) + 10.0


def svd_components(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(directions, variances)`` of one head's ``pos d`` matrix by SVD of the centred data."""
    centred = x - x.mean(0)
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)
    return vh[:k], s[:k] ** 2 / (x.shape[0] - 1)


def test_components_equal_the_svd_of_the_same_matrix():
    x = vectors(0)
    moments = Moments(3, 5)
    for chunk in x.split([7, 30, 23]):  # three texts
        moments.add(chunk)
    found = principal_components(moments, k=3)
    assert found.n_tokens == 60
    for head in range(3):
        directions, variances = svd_components(x[:, head], 3)
        np.testing.assert_allclose(found.variance[head], variances.numpy(), rtol=1e-9)
        got = torch.from_numpy(found.directions[head])
        # the same lines; the sign is fixed so that the largest coordinate is positive
        np.testing.assert_allclose(
            (got * directions).sum(-1).abs().numpy(), np.ones(3), rtol=0, atol=1e-9
        )
        biggest = got.abs().argmax(-1)
        assert (got[torch.arange(3), biggest] > 0).all()
        total = x[:, head].var(0).sum()
        np.testing.assert_allclose(found.share[head], (variances / total).numpy(), rtol=1e-9)
        np.testing.assert_allclose(found.mean[head], x[:, head].mean(0).numpy(), rtol=1e-12)


def test_top_loadings_are_the_extreme_projections():
    x = vectors(1, n=40)
    moments = Moments(3, 5)
    moments.add(x)
    components = principal_components(moments, k=2)
    top = TopLoadings(components, top=4)
    texts = [slice(0, 15), slice(15, 40)]
    for t, rows in enumerate(texts):
        top.add(x[rows], t, torch.arange(rows.start, rows.stop) + 1)  # positions start at 1
    got = top.arrays()
    for head, c in [(0, 0), (2, 1)]:
        direction = torch.from_numpy(components.directions[head, c])
        loads = (x[:, head] - x[:, head].mean(0)) @ direction
        order = loads.argsort(descending=True)
        for end, picks in ((0, order[:4]), (1, order.flip(0)[:4])):
            np.testing.assert_allclose(got["value"][head, c, end], loads[picks].numpy(), rtol=1e-9)
            where = [(0 if p < 15 else 1, int(p) + 1) for p in picks]
            found = list(zip(got["text"][head, c, end], got["position"][head, c, end], strict=True))
            assert found == where


def test_unfilled_places_are_empty():
    moments = Moments(1, 2)
    moments.add(torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]], [[2.0, 2.0]]]))
    top = TopLoadings(principal_components(moments, k=1), top=5)
    top.add(torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]]), 0, torch.tensor([1, 2]))
    got = top.arrays()
    assert np.isnan(got["value"][0, 0, :, 2:]).all() and (got["text"][0, 0, :, 2:] == -1).all()
    assert np.isfinite(got["value"][0, 0, :, :2]).all()


def test_fewer_than_two_vectors_give_no_variance():
    moments = Moments(2, 3)
    moments.add(torch.ones(1, 2, 3))
    found = principal_components(moments)
    assert (found.variance == 0).all() and (found.share == 0).all()


def test_the_output_basis_keeps_lengths_and_angles(bundled):
    from models.heads.atlas.passes import output_basis

    basis = output_basis(bundled, 1)  # head d_head d_head
    w_o = bundled.bridge.blocks[1].attn.W_O.detach().double()  # head d_head d_model
    z = torch.randn(7, 4, bundled.facts.d_head, dtype=torch.float64)
    small = torch.einsum("phd,hde->hpe", z, basis)
    full = torch.einsum("phd,hdm->hpm", z, w_o)
    # the same Gram matrix of the seven outputs, head by head
    np.testing.assert_allclose(
        (small @ small.transpose(1, 2)).numpy(),
        (full @ full.transpose(1, 2)).numpy(),
        rtol=1e-9,
        atol=1e-9,
    )


def test_a_zeroed_head_falls_back_to_the_eigenvectors(bundled, monkeypatch):
    from models.heads.atlas import passes

    w_o = bundled.bridge.blocks[1].attn.W_O.detach().double().clone()
    w_o[2] = 0.0  # head 1.2 writes nothing: its Gram matrix is singular
    w_o[3, :30] = 0.0  # head 1.3: rank 2 of 32
    monkeypatch.setattr(passes, "output_projection", lambda model, layer: (w_o, None))
    basis = passes.output_basis(bundled, 1)
    gram = w_o @ w_o.transpose(1, 2)
    np.testing.assert_allclose(
        (basis @ basis.transpose(1, 2)).numpy(), gram.numpy(), rtol=1e-9, atol=1e-9
    )
    assert torch.isfinite(basis).all() and (basis[2] == 0).all()


def test_layers_in_one_batch_give_each_layers_own_components():
    from models.heads.atlas.lowrank import layer_components

    layers = []
    for seed in (2, 3):
        moments = Moments(3, 5)
        moments.add(vectors(seed))
        layers.append(moments)
    together = layer_components(layers, k=3)
    for moments, found in zip(layers, together, strict=True):
        alone = principal_components(moments, k=3)
        np.testing.assert_allclose(found.variance, alone.variance, rtol=1e-12)
        np.testing.assert_allclose(found.directions, alone.directions, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(found.share, alone.share, rtol=1e-12)
