"""What the core reads of a loaded model's parameters, as the bridge holds them. Nothing here
runs the model.

- each head's query, key and value projections (``head_index d_model d_head`` and biases), with
  key/value heads counted as the model has them: a GQA model has ``n_kv_heads`` of them and
  query head ``h`` reads key/value head ``h // (n_heads // n_kv_heads)`` (Hugging Face's
  ``repeat_kv`` order), and each head's output projection;
- the norm in front of each attention block, as a callable module and as the affine part
  (weight, and whether it centres) that weight circuits fold into the reading matrices; the
  final norm before the unembedding;
- the token and position embeddings and the unembedding (whole, or the columns of some ids);
- the wrapped ``transformers`` model and the parameters' dtype, for code that reads its config.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from jaxtyping import Float

from models.model.facts import ModelFacts
from models.model.handle import ModelHandle
from models.model.loading import bridge_of

Projection = Literal["q", "k", "v"]


def n_heads_of(facts: ModelFacts, projection: Projection) -> int:
    """How many heads a projection has: ``n_heads`` for q, ``n_kv_heads`` for k and v."""
    return facts.n_heads if projection == "q" else facts.n_kv_heads


def projection(
    model: ModelHandle, layer: int, which: Projection, dtype: torch.dtype | None = None
) -> tuple[
    Float[torch.Tensor, "head_index d_model d_head"], Float[torch.Tensor, "head_index d_head"]
]:
    """Layer ``layer``'s q, k or v projection per head, and its bias (zeros when bias-free).

    Args:
        model: a loaded model.
        layer: the layer.
        which: ``"q"``, ``"k"`` or ``"v"``; k and v have ``n_kv_heads`` heads.
        dtype: cast to this dtype on the CPU; ``None`` keeps the model's dtype and device.
    """
    attn = bridge_of(model).blocks[layer].attn
    weight = getattr(attn, f"W_{which.upper()}").detach()
    try:
        bias = getattr(attn, f"b_{which.upper()}")
    except AttributeError:
        bias = None
    bias = (
        bias.detach()
        if bias is not None
        else torch.zeros(
            weight.shape[0], weight.shape[-1], dtype=weight.dtype, device=weight.device
        )
    )
    if dtype is not None:
        weight, bias = weight.to("cpu", dtype), bias.to("cpu", dtype)
    return weight, bias


def output_weights(
    model: ModelHandle, layer: int, dtype: torch.dtype | None = None
) -> Float[torch.Tensor, "head_index d_head d_model"]:
    """Layer ``layer``'s output projection per head (``None`` dtype: the model's, on its device)."""
    weight: torch.Tensor = bridge_of(model).blocks[layer].attn.W_O.detach()
    return weight if dtype is None else weight.to("cpu", dtype)


def input_norm(model: ModelHandle, layer: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """The norm block ``layer`` applies before its attention (a Hugging Face module), or the
    identity for post-norm models (BERT), whose attention reads the residual stream as it is.
    """
    if not pre_norm(model):
        return lambda x: x
    ln1 = bridge_of(model).blocks[layer].ln1
    norm: Callable[[torch.Tensor], torch.Tensor] = getattr(ln1, "original_component", None) or ln1
    return norm


def embedding_norm(model: ModelHandle) -> Callable[[torch.Tensor], torch.Tensor]:
    """The norm a post-norm model (BERT) applies to its embeddings before block 0 (its
    ``embeddings.LayerNorm``); the identity for pre-norm models and when there is none."""
    if pre_norm(model):
        return lambda x: x
    for name, module in bridge_of(model).original_model.named_modules():
        if name.endswith("embeddings.LayerNorm"):
            norm: Callable[[torch.Tensor], torch.Tensor] = module
            return norm
    return lambda x: x


def pre_norm(model: ModelHandle) -> bool:
    """Whether each block normalises its input before attention (GPT-2, Llama) rather than its
    output after the residual sum (BERT)."""
    return "Bert" not in model.facts.architecture and "Roberta" not in model.facts.architecture


@dataclass(frozen=True)
class ReadingNorm:
    """The affine part of a norm in front of a reading matrix: ``x -> centre(x) * weight``.

    Weight circuits ignore the division by the norm's scale (a positive number per token) and
    fold this part into the matrix that reads the residual stream.
    """

    weight: Float[torch.Tensor, " d_model"]
    centres: bool

    def fold(
        self, reading: Float[torch.Tensor, "... d_model d_out"]
    ) -> Float[torch.Tensor, "... d_model d_out"]:
        """``C diag(weight) W``, ``C`` the centring projection when the norm centres."""
        folded = self.weight[:, None] * reading
        if self.centres:
            folded = folded - folded.mean(dim=-2, keepdim=True)
        return folded


def _affine(module: Any, d_model: int) -> ReadingNorm:
    weight = getattr(module, "weight", None)
    name = type(module).__name__
    weight = (
        weight.detach().to("cpu", torch.float64)
        if weight is not None
        else torch.ones(d_model, dtype=torch.float64)
    )
    if "Gemma" in name:
        weight = weight + 1.0
    return ReadingNorm(weight=weight, centres=isinstance(module, torch.nn.LayerNorm))


def attention_norm(model: ModelHandle, layer: int) -> ReadingNorm:
    """The affine part of the norm block ``layer``'s attention reads through (identity for
    post-norm models)."""
    d_model = model.facts.d_model
    if not pre_norm(model):
        return ReadingNorm(weight=torch.ones(d_model, dtype=torch.float64), centres=False)
    return _affine(input_norm(model, layer), d_model)


def final_reading_norm(model: ModelHandle) -> ReadingNorm | None:
    """The affine part of the final norm before the unembedding (``None`` when there is none)."""
    module = getattr(getattr(bridge_of(model), "ln_final", None), "original_component", None)
    return None if module is None else _affine(module, model.facts.d_model)


def embedding(
    model: ModelHandle, tokens: slice = slice(None)
) -> Float[torch.Tensor, "d_vocab d_model"]:
    """Token embeddings (float64, CPU) of the ``tokens`` rows (a slice is read alone, so a
    caller going through the vocabulary in slices never holds a float64 copy of it all)."""
    weight: torch.Tensor = bridge_of(model).W_E.detach()[tokens].to("cpu", torch.float64)
    return weight


def mean_embedding(model: ModelHandle, chunk: int = 8192) -> Float[torch.Tensor, " d_model"]:
    """The mean token embedding (float64, CPU), summed a slice of the vocabulary at a time;
    read once per model (a whole pass over the vocabulary in float64: about 60 ms on
    SmolLM2), then kept in its memo."""
    if "mean_embedding" not in model.memo:
        n = int(bridge_of(model).W_E.shape[0])
        total = sum(embedding(model, slice(s, s + chunk)).sum(dim=0) for s in range(0, n, chunk))
        model.memo["mean_embedding"] = torch.as_tensor(total) / n
    found: torch.Tensor = model.memo["mean_embedding"]
    return found.clone()


def unembedding(
    model: ModelHandle, tokens: slice = slice(None)
) -> Float[torch.Tensor, "d_model d_vocab"] | None:
    """The unembedding (float64, CPU), its ``tokens`` columns, or ``None`` for a model
    without one."""
    try:
        weight: torch.Tensor = bridge_of(model).W_U.detach()[:, tokens].to("cpu", torch.float64)
        return weight
    except AttributeError:
        return None


def position_embedding(model: ModelHandle) -> Float[torch.Tensor, "n_ctx d_model"] | None:
    """Learned absolute position embeddings (float64, CPU), ``None`` for RoPE/ALiBi models."""
    if model.facts.positional != "standard":
        return None
    try:
        weight: torch.Tensor = bridge_of(model).W_pos.detach().to("cpu", torch.float64)
        return weight
    except AttributeError:
        return None


def tied_embeddings(model: ModelHandle) -> bool:
    """Whether the unembedding is the token embedding's transpose (same storage or values)."""
    config = getattr(bridge_of(model).original_model, "config", None)
    if getattr(config, "tie_word_embeddings", None) is False:
        return False
    try:
        w_u = bridge_of(model).W_U.detach()
    except AttributeError:
        return False
    w_e = bridge_of(model).W_E.detach()
    return w_u.shape[::-1] == w_e.shape and bool(torch.equal(w_u.T, w_e.to(w_u.dtype)))


@dataclass(frozen=True)
class FinalNorm:
    """The final norm before the unembedding: ``x -> (x - mean if centring) / scale * w + b``.

    ``kind`` is ``"layernorm"`` (centre, then divide by the standard deviation) or ``"rmsnorm"``
    (divide by the root mean square); ``weight``/``bias`` are ``d_model`` float64 (``bias``
    zeros when the norm has none); ``weight`` already includes Gemma's ``1 +``.
    """

    kind: Literal["layernorm", "rmsnorm"]
    weight: torch.Tensor
    bias: torch.Tensor
    eps: float


def output_projection(
    model: ModelHandle, layer: int
) -> tuple[Float[torch.Tensor, "head_index d_head d_model"], Float[torch.Tensor, " d_model"]]:
    """Layer ``layer``'s output projection per head, as the bridge holds it.

    Returns:
        ``head_index d_head d_model`` W_O and ``d_model`` b_O (zeros when bias-free), float64
        on CPU.
    """
    attn = bridge_of(model).blocks[layer].attn
    w_o = output_weights(model, layer, torch.float64)
    try:
        b_o = attn.b_O.detach().to("cpu", torch.float64)
    except AttributeError:  # the bridge raises for a bias-free projection
        b_o = torch.zeros(w_o.shape[-1], dtype=torch.float64)
    return w_o, b_o


def unembedding_columns(
    model: ModelHandle, token_ids: Sequence[int]
) -> tuple[Float[torch.Tensor, "d_model n_ids"], Float[torch.Tensor, " n_ids"]]:
    """The unembedding's columns and biases for ``token_ids``.

    Returns:
        ``d_model n_ids`` W_U columns and ``n_ids`` b_U (zeros when bias-free), float64 on CPU.
    """
    unembed = bridge_of(model).unembed
    idx = torch.tensor(list(token_ids), dtype=torch.long)
    w_u = unembed.W_U.detach()[:, idx.to(unembed.W_U.device)].to("cpu", torch.float64)
    b_u = getattr(unembed, "b_U", None)
    b_u = (
        b_u.detach()[idx.to(b_u.device)].to("cpu", torch.float64)
        if b_u is not None
        else torch.zeros(len(idx), dtype=torch.float64)
    )
    return w_u, b_u


def vocab_size(model: ModelHandle) -> int:
    """How many logits the model outputs per position."""
    return int(bridge_of(model).cfg.d_vocab)


def final_norm(model: ModelHandle) -> FinalNorm:
    """The final norm's kind, weight, bias and epsilon, read off the Hugging Face module.

    Raises:
        ValueError: the model has no final norm of a kind handled here.
    """
    module = getattr(bridge_of(model).ln_final, "original_component", None)
    name = type(module).__name__
    weight = getattr(module, "weight", None)
    if module is None or weight is None:
        raise ValueError(f"no final norm with a weight on {model.facts.name} ({name})")
    d_model = weight.shape[-1]
    weight = weight.detach().to("cpu", torch.float64)
    if "Gemma" in name:
        weight = weight + 1.0
    bias = getattr(module, "bias", None)
    bias = (
        bias.detach().to("cpu", torch.float64)
        if bias is not None
        else torch.zeros(d_model, dtype=torch.float64)
    )
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    kind: Literal["layernorm", "rmsnorm"]
    if isinstance(module, torch.nn.LayerNorm):
        kind = "layernorm"
    elif "RMS" in name.upper():
        kind = "rmsnorm"
    else:
        raise ValueError(
            f"the final norm of {model.facts.name} is a {name}, neither LayerNorm nor RMSNorm"
        )
    return FinalNorm(kind=kind, weight=weight, bias=bias, eps=float(eps or 0.0))


def original(model: ModelHandle) -> torch.nn.Module:
    """The ``transformers`` model the bridge wraps (its config, generation config, modules)."""
    found: torch.nn.Module = bridge_of(model).original_model
    return found


def parameter_dtype(model: ModelHandle) -> torch.dtype:
    """The dtype the model's parameters are held in."""
    dtype: torch.dtype = next(bridge_of(model).parameters()).dtype
    return dtype


def bridge_tokens(model: ModelHandle, text: str) -> list[int]:
    """``text``'s token ids with the special tokens the bridge adds around a prompt."""
    return [int(i) for i in bridge_of(model).to_tokens(text)[0]]
