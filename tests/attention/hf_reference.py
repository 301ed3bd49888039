"""Independent reference: Hugging Face eager attention on the same weights and token ids."""

from __future__ import annotations

import torch


def module_io(
    hf_model, ids: torch.Tensor, names: list[str], *, inputs: bool
) -> tuple[object, dict[str, torch.Tensor]]:
    """Run ``hf_model`` eagerly on ``ids`` and record the input (or output) of named modules.

    Args:
        hf_model: a Hugging Face model loaded with ``attn_implementation="eager"``.
        ids: ``(1, pos)`` token ids.
        names: dotted submodule names.
        inputs: record each module's first positional input instead of its output.

    Returns:
        The model output (with attentions) and name -> recorded tensor.
    """
    seen: dict[str, torch.Tensor] = {}
    handles = []
    for name in names:
        module = hf_model.get_submodule(name)
        if inputs:
            hook = (lambda n: lambda _m, args: seen.__setitem__(n, args[0].detach()))(name)
            handles.append(module.register_forward_pre_hook(hook))
        else:
            hook = (lambda n: lambda _m, _a, out: seen.__setitem__(n, out.detach()))(name)
            handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            out = hf_model.eval()(ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    return out, seen


def eager_patterns_and_z(
    hf_model, ids: torch.Tensor, projection: str, n_layers: int, n_heads: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """HF eager patterns and per-head attention outputs (z), read off the output projection.

    Args:
        hf_model: eager Hugging Face model.
        ids: ``(1, pos)`` token ids.
        projection: name template of layer ``{l}``'s output projection (its input is merged z).
        n_layers, n_heads: model shape.

    Returns:
        ``layer head_index query_pos key_pos`` patterns and ``layer head_index pos d_head`` z.
    """
    names = [projection.format(l=layer) for layer in range(n_layers)]
    out, seen = module_io(hf_model, ids, names, inputs=True)
    patterns = torch.stack(out.attentions)[:, 0].float()
    n = ids.shape[1]
    z = torch.stack([seen[name][0].reshape(n, n_heads, -1).transpose(0, 1) for name in names])
    return patterns, z.float()
