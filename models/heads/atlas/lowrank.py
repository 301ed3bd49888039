"""The low-rank view of a head: principal components of its vectors over the corpus tokens.

For each head and each of its four spaces (:data:`SPACES`) the atlas collects one vector per
corpus token, position 0 left out (the first token's vectors are outliers in most models: the
sink), and keeps

- the top principal components: the eigenvectors of the covariance of those vectors, largest
  eigenvalue first, with the share of the total variance each explains;
- for each component, the tokens that load most on it at either end (the projection of the
  centred vector on the component), so a head that does two jobs shows two groups of tokens.

The spaces: ``query`` and ``key`` are ``hook_q`` and ``hook_k`` before any rotary rotation
(what a token asks for and offers by its content, not its position); ``value`` is ``hook_v``;
``output`` is the head's output ``z W_O`` written in an orthonormal basis of W_O's row space
(``z U S`` for ``W_O = U S V^T``), an isometric image with the same variances and loadings
kept in ``d_head`` numbers (its directions are in that basis, not the residual stream's). In
a model whose query heads share key/value heads (GQA, MQA), a query head's key and value
spaces are those of its shared head.

Covariances are accumulated text by text in float64 (count, sum, sum of outer products), so
nothing per token is kept between texts; the loadings need the components, hence a second pass.
A component's sign is arbitrary: it is fixed so that its largest coordinate is positive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import torch
from jaxtyping import Float, Int

Space = Literal["query", "key", "value", "output"]
SPACES: tuple[Space, ...] = get_args(Space)
N_COMPONENTS = 4
TOP_TOKENS = 6


class Moments:
    """Count, sum and sum of outer products of ``head d`` vectors, in float64."""

    def __init__(self, n_heads: int, dim: int) -> None:
        self.n = 0
        self.total = torch.zeros(n_heads, dim, dtype=torch.float64)
        self.outer = torch.zeros(n_heads, dim, dim, dtype=torch.float64)

    def add(self, x: Float[torch.Tensor, "pos head d"]) -> None:
        x = x.to(torch.float64)
        self.n += x.shape[0]
        self.total += x.sum(dim=0)
        self.outer += torch.einsum("phd,phe->hde", x, x)

    @property
    def nbytes(self) -> int:
        return int(self.total.numel() + self.outer.numel()) * 8

    def mean(self) -> Float[torch.Tensor, "head d"]:
        return self.total / max(self.n, 1)

    def covariance(self) -> Float[torch.Tensor, "head d d"]:
        """The sample covariance (divided by ``n - 1``); zeros with fewer than two vectors."""
        if self.n < 2:
            return torch.zeros_like(self.outer)
        mean = self.mean()
        centred = self.outer - self.n * mean[:, :, None] * mean[:, None, :]
        return centred / (self.n - 1)


@dataclass(frozen=True)
class Components:
    """The top principal components of one space of every head (``head`` is the space's own
    head axis: key/value heads for ``key`` and ``value``).

    Attributes:
        mean: ``head d`` the mean vector.
        directions: ``head component d`` unit vectors, largest variance first.
        variance: ``head component`` the variance along each (eigenvalues of the covariance).
        share: ``head component`` each variance over the total variance.
        n_tokens: how many vectors the covariance was taken over.
    """

    mean: Float[np.ndarray, "head d"]
    directions: Float[np.ndarray, "head component d"]
    variance: Float[np.ndarray, "head component"]
    share: Float[np.ndarray, "head component"]
    n_tokens: int


def principal_components(moments: Moments, k: int = N_COMPONENTS) -> Components:
    """The ``k`` leading eigenvectors of each head's covariance, signed so that the largest
    coordinate is positive."""
    return layer_components([moments], k)[0]


def layer_components(moments: list[Moments], k: int = N_COMPONENTS) -> list[Components]:
    """:func:`principal_components` of several layers' moments in one batched
    eigen-decomposition (one call for the whole model, not one per layer)."""
    covs = [m.covariance() for m in moments]
    heads = [c.shape[0] for c in covs]
    values, vectors = torch.linalg.eigh(torch.cat(covs))  # ascending
    k = min(k, covs[0].shape[-1])
    values = values.flip(-1)[:, :k].clamp(min=0.0)
    vectors = vectors.flip(-1)[:, :, :k].transpose(1, 2)  # head component d
    biggest = vectors.abs().argmax(dim=-1, keepdim=True)
    sign = torch.sign(torch.gather(vectors, -1, biggest))
    vectors = vectors * torch.where(sign == 0, 1.0, sign)
    total = torch.cat([torch.diagonal(c, dim1=-2, dim2=-1).sum(-1, keepdim=True) for c in covs])
    share = torch.where(total > 0, values / total.clamp(min=1e-300), 0.0)
    parts = zip(
        moments,
        torch.split(vectors, heads),
        torch.split(values, heads),
        torch.split(share, heads),
        strict=True,
    )
    return [
        Components(m.mean().numpy(), d.numpy(), v.numpy(), s.numpy(), m.n) for m, d, v, s in parts
    ]


class TopLoadings:
    """The tokens that load most on each component, at both ends, over all texts.

    Arrays are ``head component end TOP_TOKENS`` with ``end`` 0 the positive end (largest
    loadings) and 1 the negative end (most negative); ``value`` is -inf where unfilled.
    """

    def __init__(self, components: Components, top: int = TOP_TOKENS) -> None:
        heads, k, _ = components.directions.shape
        self.mean = torch.from_numpy(components.mean)
        self.directions = torch.from_numpy(components.directions)
        shape = (heads, k, 2, top)
        self.top = top
        self.value = torch.full(shape, -torch.inf, dtype=torch.float64)
        self.text = torch.zeros(shape, dtype=torch.long)
        self.position = torch.zeros(shape, dtype=torch.long)

    def add(
        self, x: Float[torch.Tensor, "pos head d"], text: int, positions: Int[torch.Tensor, " pos"]
    ) -> None:
        """Fold one text's vectors (at ``positions``) into the running top lists."""
        loads = torch.einsum("phd,hcd->hcp", x.to(torch.float64) - self.mean, self.directions)
        both = torch.stack([loads, -loads], dim=2)  # head component end pos
        values = torch.cat([self.value, both], dim=-1)
        texts = torch.cat([self.text, torch.full_like(both, text, dtype=torch.long)], dim=-1)
        where = torch.cat([self.position, positions.expand(both.shape)], dim=-1)
        best, order = values.topk(min(self.top, values.shape[-1]), dim=-1)
        self.value = best
        self.text = texts.gather(-1, order)
        self.position = where.gather(-1, order)

    def arrays(self) -> dict[str, np.ndarray]:
        """``value`` (signed loadings: the negative end negated back; NaN where unfilled),
        ``text`` and ``position`` (-1 where unfilled)."""
        sign = torch.tensor([1.0, -1.0], dtype=torch.float64)[None, None, :, None]
        filled = torch.isfinite(self.value)
        return {
            "value": torch.where(filled, self.value * sign, torch.nan).numpy(),
            "text": torch.where(filled, self.text, -1).numpy(),
            "position": torch.where(filled, self.position, -1).numpy(),
        }


@dataclass(frozen=True)
class LowRank:
    """One space of every head, layers stacked (``head`` is the space's own head axis).

    Attributes:
        directions: ``layer head component d`` principal directions.
        variance, share: ``layer head component`` variance along each and its share.
        top_value: ``layer head component end top`` loadings (``end`` 0: positive, 1: negative).
        top_text, top_position: where those tokens are (-1 where unfilled).
        n_tokens: vectors per head the components were taken over.
        shared: the space belongs to key/value heads shared by several query heads.
    """

    directions: Float[np.ndarray, "layer head component d"]
    variance: Float[np.ndarray, "layer head component"]
    share: Float[np.ndarray, "layer head component"]
    top_value: Float[np.ndarray, "layer head component end top"]
    top_text: Int[np.ndarray, "layer head component end top"]
    top_position: Int[np.ndarray, "layer head component end top"]
    n_tokens: int
    shared: bool


def stack_layers(components: list[Components], tops: list[TopLoadings], shared: bool) -> LowRank:
    """One :class:`LowRank` from each layer's components and top loadings."""
    arrays = [top.arrays() for top in tops]
    return LowRank(
        directions=np.stack([c.directions for c in components]),
        variance=np.stack([c.variance for c in components]),
        share=np.stack([c.share for c in components]),
        top_value=np.stack([a["value"] for a in arrays]),
        top_text=np.stack([a["text"] for a in arrays]),
        top_position=np.stack([a["position"] for a in arrays]),
        n_tokens=components[0].n_tokens if components else 0,
        shared=shared,
    )
