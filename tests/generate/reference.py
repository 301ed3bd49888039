"""Independent references for the generation tests.

:func:`read_with_eviction` reads a text through a Llama model one token at a time, the way a
server with a bounded cache would: each layer caches keys before the rotation, keeps a list of
cached positions per key/value head, evicts by the policy's rule written out in plain Python,
and rotates queries and keys at the positions the policy assigns (slots in the cache for the
window and StreamingLLM policies, original positions for H2O). It shares nothing with
``models.generate.policies`` but the model's weights.
"""

from __future__ import annotations

import torch
from transformers.models.llama.modeling_llama import rotate_half


def _rotate(
    x: torch.Tensor, positions: list[int], table: tuple[torch.Tensor, torch.Tensor]
) -> torch.Tensor:
    """Rows of ``x`` (``n d``) rotated at ``positions`` (the model's own cos/sin table)."""
    cos, sin = table[0][positions], table[1][positions]
    return x * cos + rotate_half(x) * sin


def _keep(
    keep: list[int], t: int, policy: str, budget: int, sinks: int, score: dict[int, float]
) -> None:
    """Evict in place after key ``t`` joined ``keep``."""
    if len(keep) <= budget:
        return
    if policy == "window":
        del keep[: len(keep) - budget]
    elif policy == "sinks":
        keep[:] = keep[:sinks] + keep[len(keep) - (budget - sinks) :]
    elif policy == "h2o":
        recent = budget - budget // 2
        old = [j for j in keep if j <= t - recent]
        keep.remove(min(old, key=lambda j: score[j]))


@torch.no_grad()
def read_with_eviction(
    hf, ids: torch.Tensor, policy: str, budget: int, sinks: int = 0
) -> torch.Tensor:
    """Per-token losses (``n - 1``) of reading ``ids`` token by token under ``policy``."""
    m, cfg = hf.model, hf.config
    n_heads, n_kv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    group, n = n_heads // n_kv, ids.shape[1]
    keys = [[] for _ in m.layers]
    values = [[] for _ in m.layers]
    kept = [[[] for _ in range(n_kv)] for _ in m.layers]
    score = [[{} for _ in range(n_kv)] for _ in m.layers]
    cos, sin = m.rotary_emb(m.embed_tokens(ids[:, :1]), torch.arange(n)[None])
    table = (cos[0], sin[0])
    losses = []
    for t in range(n):
        h = m.embed_tokens(ids[:, t])
        for li, layer in enumerate(m.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q = attn.q_proj(x).view(n_heads, d)
            keys[li].append(attn.k_proj(x).view(n_kv, d))
            values[li].append(attn.v_proj(x).view(n_kv, d))
            outs = []
            for kv in range(n_kv):
                keep, acc = kept[li][kv], score[li][kv]
                keep.append(t)
                _keep(keep, t, policy, budget, sinks, acc)
                slots = policy in ("window", "sinks")
                q_pos = len(keep) - 1 if slots else t
                k_pos = list(range(len(keep))) if slots else list(keep)
                qr = _rotate(q[kv * group : (kv + 1) * group], [q_pos] * group, table)
                kr = _rotate(torch.stack([keys[li][j][kv] for j in keep]), k_pos, table)
                w = torch.softmax(qr @ kr.T * attn.scaling, dim=-1)
                outs.append(w @ torch.stack([values[li][j][kv] for j in keep]))
                for i, j in enumerate(keep):
                    acc[j] = acc.get(j, 0.0) + float(w[:, i].sum())
            h = h + attn.o_proj(torch.cat(outs).reshape(1, n_heads * d))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        if t + 1 < n:
            logits = hf.lm_head(m.norm(h))
            losses.append(torch.nn.functional.cross_entropy(logits, ids[:, t + 1]))
    return torch.stack(losses)
