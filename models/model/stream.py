"""The residual stream entering one attention layer, kept as the activations of its parts, and
that layer's queries and keys recomputed from other inputs.

- :func:`capture_stream`: one pass keeping what the stream entering block ``layer`` is a sum of
  (the embeddings, each earlier head's ``z``, each earlier MLP's output), the inputs of the
  norms it passes on the way (their scales are then frozen at these values), and block
  ``layer``'s queries and keys as its softmax sees them, with the RoPE tables;
- :func:`qk_with_reading`: a pass resumed at block ``layer`` whose query or key projections read
  other inputs, stopped once that layer's queries and keys are known.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float

from models.model.forward import (
    Hook,
    NormSite,
    block_norm_in_hook,
    cos_hook,
    embed_norm_in_hook,
    k_in_hook,
    mlp_out_hook,
    pattern_hook,
    pos_embed_hook,
    q_in_hook,
    qk_names,
    qk_source,
    resid_pre_hook,
    run_hooks,
    sin_hook,
    softmax_qk,
    type_embed_hook,
    z_hook,
)
from models.model.handle import ModelHandle
from models.model.loading import bridge_of
from models.model.resume import run_resumed
from models.shapes import TokenIds

Stream = Float[torch.Tensor, "pos d_model"]


class StreamUnavailable(KeyError):
    """The bridge does not show an activation the split needs."""


@dataclass(frozen=True)
class StreamActs:
    """One pass's activations the stream entering ``layer`` is rebuilt from (float32, CPU, the
    batch dimension dropped).

    Attributes:
        layer: the attention layer read.
        embeddings: the sum the embedding stage made: the embedding norm's input where there is
            one, else the stream entering block 0.
        pos_embed: learned position embeddings, ``None`` without them.
        type_embed: token type embeddings (BERT), ``None`` without them.
        z: per earlier layer, ``pos head_index d_head`` head outputs before ``W_O``.
        mlp_out: per earlier layer, ``pos d_model``: what its MLP added to the stream.
        norm_inputs: ``(layer, site) -> pos d_model`` inputs of the norms asked for.
        embed_norm_input: the embedding norm's input, when asked for.
        resid_pre: ``pos d_model``, the stream entering ``layer``.
        q: ``pos head_index d_head`` queries as the softmax sees them (rotated on RoPE models).
        k: ``pos kv_head_index d_head`` keys as the softmax sees them.
        cos, sin: ``pos rotary_dim`` RoPE tables of ``layer``, ``None`` without RoPE.
    """

    layer: int
    embeddings: Stream
    pos_embed: Stream | None
    type_embed: Stream | None
    z: tuple[Float[torch.Tensor, "pos head_index d_head"], ...]
    mlp_out: tuple[Stream, ...]
    norm_inputs: dict[tuple[int, NormSite], Stream]
    embed_norm_input: Stream | None
    resid_pre: Stream
    q: Float[torch.Tensor, "pos head_index d_head"]
    k: Float[torch.Tensor, "pos kv_head_index d_head"]
    cos: Float[torch.Tensor, "pos rotary_dim"] | None
    sin: Float[torch.Tensor, "pos rotary_dim"] | None

    @property
    def n_pos(self) -> int:
        return int(self.resid_pre.shape[0])


def stream_names(
    model: ModelHandle,
    layer: int,
    norm_sites: Sequence[tuple[int, NormSite]],
    embed_norm: bool,
    type_embed: bool,
) -> dict[str, str]:
    """Role -> hook name of everything :func:`capture_stream` keeps."""
    source = qk_source(model)
    if source is None:
        raise StreamUnavailable("this model shows neither its rotated queries nor its RoPE tables")
    names = {"resid_pre": resid_pre_hook(layer), "start": resid_pre_hook(0)}
    if embed_norm:
        names["embed_norm"] = embed_norm_in_hook()
    if model.facts.positional == "standard":
        names["pos_embed"] = pos_embed_hook()
    if type_embed:
        names["type_embed"] = type_embed_hook()
    for earlier in range(layer):
        names[f"z.{earlier}"] = z_hook(earlier)
        names[f"mlp.{earlier}"] = mlp_out_hook(earlier)
    for at, site in norm_sites:
        names[f"{site}.{at}"] = block_norm_in_hook(at, site)
    for i, name in enumerate(qk_names(source, layer)):
        names[f"qk.{i}"] = name
    if model.facts.positional == "rotary":
        names["cos"], names["sin"] = cos_hook(layer), sin_hook(layer)
    return names


def capture_stream(
    model: ModelHandle,
    ids: TokenIds,
    layer: int,
    norm_sites: Sequence[tuple[int, NormSite]] = (),
    embed_norm: bool = False,
    type_embed: bool = False,
) -> StreamActs:
    """One pass over ``ids`` (``1 pos``) keeping the parts of the stream entering ``layer``.

    Args:
        model: a loaded model.
        ids: ``1 pos`` token ids.
        layer: the attention layer to be read.
        norm_sites: the block norms whose inputs to keep (their scales get frozen).
        embed_norm: keep the embedding norm's input too.
        type_embed: keep the token type embeddings (BERT).

    Raises:
        StreamUnavailable: the bridge does not show one of them.
    """
    names = stream_names(model, layer, norm_sites, embed_norm, type_embed)
    try:
        acts = {role: act[0] for role, act in _run(model, ids, names).items()}
    except KeyError as err:
        raise StreamUnavailable(f"the bridge does not show {err}") from err
    source = qk_source(model)
    assert source is not None
    q, k = softmax_qk(
        {name: acts[role][None] for role, name in names.items() if role.startswith("qk.")},
        layer,
        source,
    )
    return StreamActs(
        layer=layer,
        embeddings=acts.get("embed_norm", acts["start"]),
        pos_embed=acts.get("pos_embed"),
        type_embed=acts.get("type_embed"),
        z=tuple(acts[f"z.{earlier}"] for earlier in range(layer)),
        mlp_out=tuple(acts[f"mlp.{earlier}"] for earlier in range(layer)),
        norm_inputs={(at, site): acts[f"{site}.{at}"] for at, site in norm_sites},
        embed_norm_input=acts.get("embed_norm"),
        resid_pre=acts["resid_pre"],
        q=q[0],
        k=k[0],
        cos=acts.get("cos"),
        sin=acts.get("sin"),
    )


def _run(model: ModelHandle, ids: TokenIds, names: dict[str, str]) -> dict[str, torch.Tensor]:
    found = run_hooks(model, ids, set(names.values()))
    return {role: found[name] for role, name in names.items()}


class _Stop(Exception):
    """Raised by a hook once the layer's queries and keys are known: nothing later is needed."""


def qk_with_reading(
    model: ModelHandle,
    ids: TokenIds,
    layer: int,
    resid_pre: Stream,
    q_read: Float[torch.Tensor, "copies pos d_model"] | None,
    k_read: Float[torch.Tensor, "copies pos d_model"] | None,
) -> tuple[
    Float[torch.Tensor, "copies pos head_index d_head"],
    Float[torch.Tensor, "copies pos kv_head_index d_head"],
]:
    """Block ``layer``'s queries and keys when its query (or key) projection reads ``q_read``
    (``k_read``) instead of its norm's output; everything else as in the pass that gave
    ``resid_pre``. One batched pass resumed at block ``layer``, stopped once the queries and keys
    are known (so RoPE, QK-norm and the projections are the model's own).

    Args:
        model: a loaded model.
        ids: ``1 pos`` token ids.
        layer: the attention layer.
        resid_pre: ``pos d_model``, the stream entering ``layer`` in the unchanged pass.
        q_read, k_read: ``copies pos d_model`` inputs of the projections; ``None`` keeps the
            model's own (at least one is given).
    """
    given = q_read if q_read is not None else k_read
    assert given is not None
    copies = int(given.shape[0])
    source = qk_source(model)
    assert source is not None
    seen: dict[str, torch.Tensor] = {}
    param = next(bridge_of(model).parameters())
    names = qk_names(source, layer)

    def keep(name: str) -> Callable[..., None]:
        def hook(act: torch.Tensor, hook: object = None) -> None:
            seen[name] = act.detach().to("cpu", torch.float32)
            if len(seen) == len(names):  # the attention scores themselves are not needed
                raise _Stop

        return hook

    def replace(values: torch.Tensor) -> Callable[..., torch.Tensor]:
        def hook(act: torch.Tensor, hook: object = None) -> torch.Tensor:
            return values.to(act.device, act.dtype)

        return hook

    def stop(_act: torch.Tensor, hook: object = None) -> None:
        raise _Stop

    hooks: list[Hook] = [(name, keep(name)) for name in names]
    if q_read is not None:
        hooks.append((q_in_hook(layer), replace(q_read)))
    if k_read is not None:
        hooks.append((k_in_hook(layer), replace(k_read)))
    hooks.append((pattern_hook(layer), stop))
    stored = [resid_pre[None].to(param.device, param.dtype)] * layer
    with contextlib.suppress(_Stop):
        run_resumed(model, ids, hooks, layer, stored, copies=copies)
    return softmax_qk(seen, layer, source)
