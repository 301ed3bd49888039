"""Independent references for the variant tests: transformers' own computations, read from
inside its forward pass (eager attention, the delta rule, the gate projection)."""

from __future__ import annotations

import importlib
from unittest import mock

import torch
from transformers import AutoModelForCausalLM
from transformers.models.qwen3_next import modeling_qwen3_next


def eager(path):
    return AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()


def hf_attentions(path, ids):
    """Hugging Face eager weights of every layer (None for a layer with no softmax)."""
    with torch.no_grad():
        return eager(path)(ids, output_attentions=True).attentions


def delta_rule_inside_transformers(path, ids, layer: int = 0):
    """q, k, v, g, beta and the output of transformers' delta rule, as the model's own forward
    pass called it for its ``layer``-th linear-attention layer (first sequence)."""
    real = modeling_qwen3_next.torch_chunk_gated_delta_rule
    calls = []

    def record(query, key, value, g, beta, **kwargs):
        out = real(query, key, value, g=g, beta=beta, **kwargs)
        calls.append((query, key, value, g, beta, out[0]))
        return out

    patched = mock.patch.object(modeling_qwen3_next, "torch_chunk_gated_delta_rule", record)
    with patched, torch.no_grad():
        eager(path)(ids)
    return [x[0] for x in calls[layer]]


def hf_gate(path, ids, layer: int, n_heads: int):
    """``head_index query_pos`` mean of ``sigmoid(gate)`` from the model's own q projection."""
    hf = eager(path)
    attn = hf.model.layers[layer].self_attn
    seen = {}
    handle = attn.q_proj.register_forward_hook(lambda _m, _a, out: seen.setdefault("q", out))
    with torch.no_grad():
        hf(ids)
    handle.remove()
    n = ids.shape[1]
    gate = seen["q"][0].view(n, n_heads, 2 * attn.head_dim).chunk(2, dim=-1)[1]
    return torch.sigmoid(gate).mean(-1).transpose(0, 1)


def mixing_inside_transformers(path, ids, layer: int = 0):
    """``v_head query_pos key_pos`` mixing matrix of the ``layer``-th linear-attention layer,
    read from transformers' own delta rule: called again on the model's q, k, g and beta with
    one-hot values (token s's value is the unit vector e_s), so output t is row t of M."""
    real = modeling_qwen3_next.torch_chunk_gated_delta_rule
    calls = []

    def record(query, key, value, g, beta, **kwargs):
        calls.append((query, key, value, g, beta, kwargs))
        return real(query, key, value, g=g, beta=beta, **kwargs)

    patched = mock.patch.object(modeling_qwen3_next, "torch_chunk_gated_delta_rule", record)
    with patched, torch.no_grad():
        eager(path)(ids)
        query, key, value, g, beta, kwargs = calls[layer]
        n, heads = value.shape[1], value.shape[2]
        one_hot = torch.eye(n, dtype=value.dtype)[None, :, None, :].expand(1, n, heads, n)
        out = real(query, key, one_hot.contiguous(), g=g, beta=beta, **kwargs)[0]
    return out[0].permute(1, 0, 2)


def hf_value_weighted(path, ids, layer: int):
    """``head_index query_pos key_pos`` value-weighted pattern of one softmax layer, from what
    transformers' eager attention is handed and returns: ``A[i, j] * ||(g_i ⊙ v_j) W_O^h||``
    (no gate: ``g_i = 1``) over its row's sum, float64. The values are the ones the eager
    function received (before ``repeat_kv``), the gate is read from the q projection's output,
    ``W_O^h`` is head ``h``'s slice of ``o_proj``'s columns."""
    hf = eager(path)
    attn = hf.model.layers[layer].self_attn
    module = importlib.import_module(type(attn).__module__)
    real = module.eager_attention_forward
    seen = {}

    def record(mod, query, key, value, *args, **kwargs):
        out = real(mod, query, key, value, *args, **kwargs)
        if mod is attn:
            seen["value"], seen["weights"] = value[0].double(), out[1][0].double()
        return out

    q_proj = getattr(attn, "q_proj", None)  # DeepSeek-V3 projects q through a latent instead
    gated = q_proj is not None and q_proj.out_features == 2 * hf.config.num_attention_heads * (
        attn.head_dim
    )
    if gated:
        handle = q_proj.register_forward_hook(lambda _m, _a, out: seen.setdefault("q", out))
    with mock.patch.object(module, "eager_attention_forward", record), torch.no_grad():
        hf(ids)
    if gated:
        handle.remove()
    weights, value = seen["weights"], seen["value"]  # head q k; kv_head k d_v
    heads, n, d_v = weights.shape[0], weights.shape[1], value.shape[-1]
    w_o = attn.o_proj.weight.detach().double().T.reshape(heads, d_v, -1)
    gate = torch.ones(heads, n, d_v, dtype=torch.float64)
    if gated:
        q = seen["q"][0].double().view(n, heads, 2 * attn.head_dim)
        gate = torch.sigmoid(q.chunk(2, dim=-1)[1]).transpose(0, 1)
    group = heads // value.shape[0]
    norms = torch.empty(heads, n, n, dtype=torch.float64)
    for h in range(heads):
        v = value[h // group]  # key d_v
        moved = gate[h][:, None, :] * v[None, :, :]  # query key d_v
        norms[h] = torch.linalg.vector_norm(moved @ w_o[h], dim=-1)
    scaled = weights * norms
    total = scaled.sum(-1, keepdim=True)  # 0 where a head writes nothing (a zero value): kept 0
    return torch.where(total > 0, scaled / total.clamp_min(1e-300), 0.0).numpy()
