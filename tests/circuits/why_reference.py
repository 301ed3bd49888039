"""Independent reference for the exact QK split: plain ``transformers`` models and forward hooks.

A fresh Hugging Face model is loaded from the same checkpoint (not the bridge) and runs eagerly
through a recording attention function: it keeps each layer's query and key exactly as the
model's own eager attention receives them (after its norm, projection, QK-norm and RoPE), the
scale and soft-cap it was given, and the weights it returned. Pre-softmax logits are
``scale * q . k`` from those records, written here and nowhere else.

Removing a part is done the way the definition says, with hooks: the clean pass records each
norm's input, its scale is computed here from that input (LayerNorm: standard deviation; RMSNorm:
root mean square), and a removed pass feeds the query (or key) projection the frozen norm of
``residual - part`` -- or, with scales free, the model's own norm module of it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

RECORDER = "why_reference"
_records: list[dict] = []


def _recording_attention(module, query, key, value, attention_mask, **kwargs):
    eager = sys.modules[type(module).__module__].eager_attention_forward
    out, weights = eager(module, query, key, value, attention_mask, **kwargs)
    scaling = kwargs.get("scaling")
    _records.append(
        {
            "query": query.detach().double(),
            "key": key.detach().double(),
            "scaling": float(query.shape[-1] ** -0.5 if scaling is None else scaling),
            "softcap": kwargs.get("softcap"),
            "weights": weights.detach().double(),
        }
    )
    return out, weights


AttentionInterface.register(RECORDER, _recording_attention)
AttentionMaskInterface.register(RECORDER, eager_mask)


@dataclass(frozen=True)
class Family:
    """Where a Hugging Face architecture keeps what the reference hooks.

    ``norm`` (the block's norm in front of attention, ``None`` for BERT), ``q``/``k`` (the
    projections; GPT-2's fused ``c_attn`` has both, as column blocks), ``q_norm``/``k_norm``
    (QK-norm), ``o`` (the output projection, its input the merged head outputs), ``mlp`` (the
    module whose output is what the MLP adds to the stream), ``offset`` (Gemma's ``1 + w``).
    """

    layers: str
    norm: str | None
    q: str
    k: str
    o: str
    mlp: str
    q_norm: str | None = None
    k_norm: str | None = None
    offset: float = 0.0
    fused: bool = False
    layernorm: bool = False


FAMILIES = {
    "gpt2": Family("transformer.h", "ln_1", "attn.c_attn", "attn.c_attn", "attn.c_proj", "mlp",
                   fused=True, layernorm=True),
    "llama": Family("model.layers", "input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                    "self_attn.o_proj", "mlp"),
    "qwen3": Family("model.layers", "input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                    "self_attn.o_proj", "mlp", "self_attn.q_norm", "self_attn.k_norm"),
    "gemma2": Family("model.layers", "input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                     "self_attn.o_proj", "post_feedforward_layernorm", offset=1.0),
    "bert": Family("encoder.layer", None, "attention.self.query", "attention.self.key",
                   "attention.output.dense", "output.dense", layernorm=True),
}  # fmt: skip


def divisor(x: torch.Tensor, eps: float, layernorm: bool) -> torch.Tensor:
    """What a norm divides each vector of ``x`` by (float64, trailing dimension kept)."""
    x = x.double()
    if layernorm:
        return (x.var(dim=-1, unbiased=False, keepdim=True) + eps).sqrt()
    return (x.pow(2).mean(dim=-1, keepdim=True) + eps).sqrt()


@dataclass
class Edit:
    """One removed pass: ``part`` (``pos d_model``) taken out of what the query (``side ==
    "query"``, at ``positions``) or key projection of ``layer`` reads; ``frozen`` freezes the
    norm and QK-norm scales at the clean pass's values, else the model's own modules recompute
    them."""

    layer: int
    side: str
    part: torch.Tensor
    positions: list[int]
    frozen: bool = True


class Reference:
    """A plain ``transformers`` model of one family, its passes recorded."""

    def __init__(self, hf_model, family: str) -> None:
        self.hf = hf_model.eval()
        self.hf.config._attn_implementation = RECORDER
        self.family = FAMILIES[family]
        self.clean: dict = {}

    def module(self, layer: int, path: str | None) -> torch.nn.Module | None:
        if path is None:
            return None
        return self.hf.get_submodule(f"{self.family.layers}.{layer}.{path}")

    def run(self, ids: torch.Tensor, edit: Edit | None = None) -> list[dict]:
        """Every layer's record (query, key, scaling, softcap, weights) of one pass."""
        _records.clear()
        handles = self._clean_hooks() if edit is None else self._edit_hooks(edit)
        try:
            with torch.no_grad():
                self.hf(ids, attention_mask=torch.ones_like(ids))
        finally:
            for handle in handles:
                handle.remove()
        return list(_records)

    def raw(self, records: list[dict], layer: int, head: int) -> torch.Tensor:
        """``query_pos key_pos`` logits of ``layer``'s head ``head`` before any cap."""
        rec = records[layer]
        group = rec["query"].shape[1] // rec["key"].shape[1]
        q, k = rec["query"][0, head], rec["key"][0, head // group]
        return q @ k.T * rec["scaling"]

    # --- parts, as the reference sees them --------------------------------------------

    def mlp_part(self, layer: int) -> torch.Tensor:
        """``pos d_model``: what MLP ``layer`` added to the stream, from the clean pass."""
        return self.clean[("mlp", layer)]

    def head_part(self, layer: int, head: int) -> torch.Tensor:
        """``pos d_model``: head ``layer.head``'s ``z W_O``, from the clean pass."""
        z = self.clean[("o", layer)]
        o = self.module(layer, self.family.o)
        d = z.shape[-1] // self.hf.config.num_attention_heads
        cols = slice(head * d, (head + 1) * d)
        weight = o.weight.double()
        w_o = weight[cols] if self.family.fused else weight[:, cols].T
        return z[:, cols] @ w_o

    # --- hooks ---------------------------------------------------------------------------

    def _clean_hooks(self) -> list:
        handles = []
        n_layers = self.hf.config.num_hidden_layers
        for layer in range(n_layers):
            for name, path in (("norm", self.family.norm), ("q_norm", self.family.q_norm),
                               ("k_norm", self.family.k_norm), ("o", self.family.o)):  # fmt: skip
                module = self.module(layer, path)
                if module is not None:
                    handles.append(module.register_forward_pre_hook(self._keep_input(name, layer)))
            mlp = self.module(layer, self.family.mlp)
            handles.append(mlp.register_forward_hook(self._keep_output(("mlp", layer))))
        return handles

    def _keep_input(self, name: str, layer: int) -> Callable:
        def hook(_module, args):
            self.clean[(name, layer)] = args[0][0].detach().double()

        return hook

    def _keep_output(self, key: tuple) -> Callable:
        def hook(_module, _args, out):
            self.clean[key] = out[0].detach().double()

        return hook

    def _norm(self, layer: int, x: torch.Tensor, frozen: bool) -> torch.Tensor:
        """The reading norm of ``x`` (``pos d_model``): frozen at the clean scale, or the
        model's own module."""
        module = self.module(layer, self.family.norm)
        if module is None:
            return x
        if not frozen:
            return module(x.to(module.weight.dtype)[None])[0].double()
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", 0.0))
        clean = self.clean[("norm", layer)]
        if self.family.layernorm:
            x = x - x.mean(dim=-1, keepdim=True)
        out = (
            x
            / divisor(clean, eps, self.family.layernorm)
            * (module.weight.double() + self.family.offset)
        )
        bias = getattr(module, "bias", None)
        return out if bias is None else out + bias.double()

    def _edit_hooks(self, edit: Edit) -> list:
        layer, family = edit.layer, self.family
        assert family.norm is not None, "removal is checked on pre-norm models"
        rows = torch.tensor(edit.positions)
        changed = self._norm(layer, self.clean[("norm", layer)] - edit.part, edit.frozen)[rows]
        projection = self.module(layer, family.q if edit.side == "query" else family.k)
        handles = []
        if family.fused:
            d = self.hf.config.hidden_size
            cols = slice(0, d) if edit.side == "query" else slice(d, 2 * d)

            def fused(module, _args, out):  # GPT-2's Conv1D: x @ weight + bias
                out = out.clone()
                redone = changed @ module.weight.double() + module.bias.double()
                out[0, rows, cols] = redone[:, cols].to(out.dtype)
                return out

            handles.append(projection.register_forward_hook(fused))
        else:

            def swap(_module, args):
                x = args[0].clone()
                x[0, rows] = changed.to(x.dtype)
                return (x,)

            handles.append(projection.register_forward_pre_hook(swap))
        qk_norm = family.q_norm if edit.side == "query" else family.k_norm
        norm_module = self.module(layer, qk_norm)
        if edit.frozen and qk_norm is not None and norm_module is not None:
            handles.append(norm_module.register_forward_hook(self._frozen_qk(layer, qk_norm)))
        return handles

    def _frozen_qk(self, layer: int, path: str) -> Callable:
        name = "q_norm" if path == self.family.q_norm else "k_norm"
        clean = self.clean[(name, layer)]

        def hook(module, args, out):
            eps = module.variance_epsilon
            scale = divisor(clean, eps, False)
            frozen = args[0][0].double() / scale * (module.weight.double() + self.family.offset)
            return frozen[None].to(out.dtype)

        return hook
