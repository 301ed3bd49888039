"""The residual stream entering an attention layer as a sum of named parts, every norm's scale
frozen at its value on the prompt.

The parts, named as everywhere in the app: ``embed`` (token embeddings), ``pos_embed`` (learned
positions), ``type_embed`` (BERT's token types), ``L.H`` (head ``L.H``'s output ``z W_O``),
``b_O.L`` (layer ``L``'s attention output bias), ``mlp.L`` (what MLP ``L`` added), and the bias
of each norm on the way: ``b_ln_embed`` (the embedding norm), ``b_ln1.L`` / ``b_ln2.L`` (BERT's
norms after each sublayer), ``b_ln1_post.L`` (Gemma's norm of the attention output). A bias that
is zero is no part.

A norm with its scale ``s`` frozen is affine, ``x -> centre(x) * w / s + b``, so a sum of parts
stays a sum of parts through it: each part becomes ``centre(part) * w / s`` and ``b`` joins as
a part of its own. Parts are kept factored, ``source @ matrix * scale``: a head's source is its
``z`` (``d_head`` wide) and its matrix ``W_O`` followed by every frozen norm it passes, so the
stream of SmolLM2 at 2,048 tokens is kept in the size of its activations, not 290 copies of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from jaxtyping import Float

from models.model.forward import NormSite, has_hook, type_embed_hook
from models.model.handle import ModelHandle
from models.model.norms import Norm, block_norm, embedding_norm
from models.model.stream import StreamActs
from models.model.weights import output_projection, pre_norm

PositionIndex = torch.Tensor | slice


@dataclass(frozen=True)
class PartGroup:
    """Parts that share a shape: part ``g`` at position ``p`` is
    ``source[p, g] @ matrix[g] * scale[p]``.

    Attributes:
        names: one per part.
        source: ``pos group d_src`` (float32 or float64), or ``1 group d_src`` for a part that
            is the same at every position (a bias).
        matrix: ``group d_src d_out`` float64; ``None`` for the identity.
        scale: ``pos`` float64 multiplier, ``None`` for 1.
    """

    names: tuple[str, ...]
    source: torch.Tensor
    matrix: torch.Tensor | None = None
    scale: torch.Tensor | None = None

    def values(
        self, positions: PositionIndex, dtype: torch.dtype = torch.float64
    ) -> Float[torch.Tensor, "pos group d_out"]:
        """The parts at ``positions`` (an index tensor or a slice of the prompt)."""
        source = self.source if self.source.shape[0] == 1 else self.source[positions]
        source = source.to(dtype)
        out = (
            source
            if self.matrix is None
            else torch.einsum("pgd,gde->pge", source, self.matrix.to(dtype))
        )
        if self.scale is not None:
            out = out * self.scale[positions].to(dtype)[:, None, None]
        return out

    def then(
        self,
        matrix: Float[torch.Tensor, "d_in d_out"],
        divisor: Float[torch.Tensor, " pos"] | None = None,
    ) -> PartGroup:
        """These parts passed through ``x -> x @ matrix / divisor[pos]``."""
        composed = (
            matrix.expand(len(self.names), *matrix.shape)
            if self.matrix is None
            else self.matrix @ matrix
        )
        scale = self.scale
        if divisor is not None:
            scale = 1.0 / divisor if scale is None else scale / divisor
        return replace(self, matrix=composed, scale=scale)

    def normed(self, norm: Norm, divisor: Float[torch.Tensor, " pos"]) -> PartGroup:
        """These parts through ``norm`` with its scale frozen at ``divisor``: ``then`` with the
        norm's matrix, composed in ``O(size)`` (centring subtracts each row's mean)."""
        if self.matrix is None:
            return self.then(norm_matrix(norm), divisor)
        composed = self.matrix
        if norm.centres:
            composed = composed - composed.mean(dim=-1, keepdim=True)
        return replace(self, matrix=composed * norm.weight).then_scale(divisor)

    def then_scale(self, divisor: Float[torch.Tensor, " pos"]) -> PartGroup:
        """These parts divided by ``divisor[pos]``."""
        return replace(self, scale=1.0 / divisor if self.scale is None else self.scale / divisor)


@dataclass(frozen=True)
class StreamParts:
    """The stream entering ``layer`` as named parts (see the module docstring)."""

    layer: int
    n_pos: int
    groups: tuple[PartGroup, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for group in self.groups for name in group.names)

    def values(self, positions: PositionIndex) -> Float[torch.Tensor, "pos part d_model"]:
        """Every part at ``positions`` (float64)."""
        return stack_groups([group.values(positions) for group in self.groups])

    def part(self, name: str, positions: PositionIndex) -> Float[torch.Tensor, "pos d_model"]:
        """Part ``name`` at ``positions`` (float64; a bias repeated at each position).

        Raises:
            KeyError: no part of that name.
        """
        for group in self.groups:
            if name in group.names:
                values = group.values(positions)[:, group.names.index(name)]
                count = (
                    len(range(self.n_pos)[positions])
                    if isinstance(positions, slice)
                    else len(positions)
                )
                return values.expand(count, -1)
        raise KeyError(name)


def stack_groups(values: list[torch.Tensor]) -> torch.Tensor:
    """``pos part d`` from each group's ``pos group d`` (a bias's single row repeated)."""
    n = max(v.shape[0] for v in values)
    return torch.cat([v.expand(n, -1, -1) for v in values], dim=1)


def norm_matrix(norm: Norm) -> Float[torch.Tensor, "d d"]:
    """``centre(x) * weight`` as a matrix acting on row vectors (``x @ M``)."""
    d = norm.weight.shape[0]
    centre = torch.eye(d, dtype=torch.float64)
    if norm.centres:
        centre = centre - 1.0 / d
    return centre * norm.weight[None, :]


def through_norm(
    groups: list[PartGroup], norm: Norm, norm_input: torch.Tensor, bias_name: str
) -> list[PartGroup]:
    """``groups`` passed through ``norm`` with its scale frozen at its value on ``norm_input``
    (``pos d``), and the norm's bias as one more part."""
    divisor = norm.divisor(norm_input)
    out = [group.normed(norm, divisor) for group in groups]
    if norm.bias is not None and bool(norm.bias.any()):
        out.append(PartGroup((bias_name,), norm.bias[None, None]))
    return out


def _dense(name: str, values: torch.Tensor) -> PartGroup:
    return PartGroup((name,), values[:, None])


@dataclass(frozen=True)
class Layout:
    """Where the norms sit on the stream's way into ``layer``.

    Attributes:
        pre_norm: each block normalises its input (GPT-2, Llama); ``False`` for BERT's norms
            after each sublayer.
        embed_norm: the norm over the embeddings, or ``None``.
        type_embed: whether token type embeddings join (BERT).
        attn_out_norms: per earlier layer, the norm of the attention output before it joins
            the stream (Gemma's ``ln1_post``), or ``None``.
    """

    pre_norm: bool
    embed_norm: Norm | None
    type_embed: bool
    attn_out_norms: tuple[Norm | None, ...]

    def norm_sites(self) -> list[tuple[int, NormSite]]:
        """The block norms whose inputs the pass must keep."""
        sites: list[tuple[int, NormSite]] = []
        for at, norm in enumerate(self.attn_out_norms):
            if norm is not None:
                sites.append((at, "ln1_post"))
            if not self.pre_norm:
                sites += [(at, "ln1"), (at, "ln2")]
        return sites


def layout(model: ModelHandle, layer: int) -> Layout:
    """The norms between the embeddings and block ``layer``'s attention."""
    return Layout(
        pre_norm=pre_norm(model),
        embed_norm=embedding_norm(model),
        type_embed=has_hook(model, type_embed_hook()),
        attn_out_norms=tuple(block_norm(model, at, "ln1_post") for at in range(layer)),
    )


def stream_parts(model: ModelHandle, acts: StreamActs, plan: Layout) -> StreamParts:
    """The stream entering ``acts.layer`` as named parts with every norm's scale frozen."""
    named = [("pos_embed", acts.pos_embed), ("type_embed", acts.type_embed)]
    embed = acts.embeddings.to(torch.float64)
    for _, values in named:
        embed = embed if values is None else embed - values
    groups = [_dense("embed", embed)]
    groups += [_dense(name, values) for name, values in named if values is not None]
    if plan.embed_norm is not None:
        assert acts.embed_norm_input is not None
        groups = through_norm(groups, plan.embed_norm, acts.embed_norm_input, "b_ln_embed")
    for at in range(acts.layer):
        w_o, b_o = output_projection(model, at)
        n_heads = w_o.shape[0]
        attn = [PartGroup(tuple(f"{at}.{h}" for h in range(n_heads)), acts.z[at], w_o)]
        if bool(b_o.any()):
            attn.append(PartGroup((f"b_O.{at}",), b_o[None, None]))
        out_norm = plan.attn_out_norms[at]
        if out_norm is not None:
            attn = through_norm(
                attn, out_norm, acts.norm_inputs[(at, "ln1_post")], f"b_ln1_post.{at}"
            )
        groups += attn
        if not plan.pre_norm:
            groups = through_norm(
                groups, _post(model, at, "ln1"), acts.norm_inputs[(at, "ln1")], f"b_ln1.{at}"
            )
        groups.append(_dense(f"mlp.{at}", acts.mlp_out[at]))
        if not plan.pre_norm:
            groups = through_norm(
                groups, _post(model, at, "ln2"), acts.norm_inputs[(at, "ln2")], f"b_ln2.{at}"
            )
    return StreamParts(acts.layer, acts.n_pos, tuple(groups))


def _post(model: ModelHandle, at: int, site: NormSite) -> Norm:
    norm = block_norm(model, at, site)
    assert norm is not None, f"block {at} has no {site}"
    return norm
