"""Value-weighted attention (Kobayashi et al. 2020): how much a head actually moves from a key.

A head's output at query ``i`` is ``sum_j A[i, j] v_j W_O^h``. The weight ``A[i, j]`` says where
it looks; ``A[i, j] * ||v_j W_O^h||`` says how much of what it writes comes from key ``j``. A
head that looks hard at a token whose value it writes as almost nothing (typical of attention
sinks) shows little weight there once each row is renormalised to sum to 1.

On GQA/MQA models query head ``h`` reads key/value head ``h // (n_heads / n_kv_heads)``, as
Hugging Face's ``repeat_kv`` lays them out.
"""

from __future__ import annotations

import numpy as np
import torch

from models.model.forward import every_layer, run_hooks, v_hook
from models.model.loading import LoadedModel
from models.model.weights import output_projection


def value_norms(model: LoadedModel, ids: torch.Tensor) -> np.ndarray:
    """``||v_j W_O^h||`` for every layer, query head and key position of ``ids``.

    Args:
        model: the loaded model.
        ids: ``1 pos`` token ids.

    Returns:
        ``layer head_index key_pos`` float32 (``v`` includes the value bias; ``b_O`` is not part
        of any one key's share and is left out).
    """
    facts = model.facts
    names = every_layer(v_hook, facts.n_layers)
    acts = run_hooks(model, ids, names)
    group = facts.n_heads // facts.n_kv_heads
    out = []
    for layer, name in enumerate(names):
        v = acts[name][0].to(torch.float64)  # pos kv_head d_head
        v = v.repeat_interleave(group, dim=1)  # pos head_index d_head
        w_o, _ = output_projection(model, layer)  # head_index d_head d_model
        # ||v W_O||^2 = v (W_O W_O^T) v^T: d_head x d_head per head instead of a d_model vector
        # per position, so long prompts need no pos x head x d_model buffer
        gram = w_o @ w_o.transpose(1, 2)
        squared = torch.einsum("phd,hde,phe->hp", v, gram, v)
        out.append(squared.clamp_min(0.0).sqrt())
    return torch.stack(out).to(torch.float32).numpy()


def value_weighted(pattern: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """``A[i, j] * norm[j]``, renormalised so each row sums to 1 (rows of zeros stay zero).

    Args:
        pattern: ``... query_pos key_pos`` attention weights.
        norms: ``... key_pos`` value norms, broadcast against ``pattern``'s leading axes.

    Returns:
        Same shape as ``pattern``, float32.
    """
    weighted = np.asarray(pattern, dtype=np.float64) * np.asarray(norms, np.float64)[..., None, :]
    total = weighted.sum(axis=-1, keepdims=True)
    safe = np.where(total > 0, total, 1.0)
    return np.where(total > 0, weighted / safe, 0.0).astype(np.float32)
