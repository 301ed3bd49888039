"""Forward passes that resume from a stored block output, for ablating many heads: the clean
pass keeps every block's output, and an ablated pass for a head in layer ``l`` starts at block
``l`` with that output instead of recomputing the blocks before it. Also the plain forward of a
standalone checkpoint the app wrote itself."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from models.model.forward import Hook, model_device, released_patterns, run_with_hooks
from models.model.handle import ModelHandle
from models.model.loading import bridge_of
from models.shapes import Logits, Residual, TokenIds


def clean_pass(
    model: ModelHandle, ids: TokenIds, hook_names: Iterable[str] = ()
) -> tuple[Logits, dict[str, torch.Tensor], list[Residual] | None]:
    """One pass under the lock: logits, the named activations, and every block's output.

    Args:
        model: a loaded model.
        ids: ``batch pos`` token ids.
        hook_names: activations to return (on CPU, float32).

    Returns:
        ``(logits, activations, block outputs)``; the block outputs (``batch pos d_model``, on
        the model's device) are ``None`` when a block returns something other than one tensor,
        and :func:`run_resumed` then runs the whole model.
    """
    wanted = set(hook_names)
    blocks = list(getattr(bridge_of(model), "blocks", []))
    outputs: dict[int, torch.Tensor | None] = {}

    def keep(index: int) -> Callable[[torch.nn.Module, Any, Any], None]:
        def hook(_module: torch.nn.Module, _inputs: Any, output: Any) -> None:
            outputs[index] = output.detach() if torch.is_tensor(output) else None

        return hook

    with model.lock, torch.no_grad(), released_patterns(bridge_of(model)):
        handles = [block.register_forward_hook(keep(j)) for j, block in enumerate(blocks)]
        try:
            logits, cache = bridge_of(model).run_with_cache(
                ids.to(model_device(model)), names_filter=lambda n: n in wanted
            )
        finally:
            for handle in handles:
                handle.remove()
        acts = {name: cache[name].detach().to("cpu", torch.float32) for name in wanted}
    stored = [outputs.get(j) for j in range(len(blocks))]
    kept = [o for o in stored if o is not None]
    return logits, acts, (kept if blocks and len(kept) == len(blocks) else None)


def run_resumed(
    model: ModelHandle,
    ids: TokenIds,
    fwd_hooks: Sequence[Hook],
    start: int,
    outputs: list[Residual] | None,
    copies: int = 1,
) -> torch.Tensor:
    """Logits of ``copies`` copies of ``ids`` with ``fwd_hooks``, skipping blocks ``< start``.

    The skipped blocks pass on ``outputs[start - 1]`` (block ``start - 1``'s output in a
    :func:`clean_pass` of the same ids) instead of computing it, so the pass costs only the
    blocks from ``start`` on. Exact as long as no hook acts before block ``start``.

    Args:
        model: a loaded model.
        ids: ``1 pos`` token ids.
        fwd_hooks: ``(hook name, fn)`` pairs, on blocks ``>= start`` only.
        start: the first block that computes.
        outputs: from :func:`clean_pass`; ``None`` runs every block.
        copies: the batch size.

    Returns:
        ``copies pos d_vocab`` logits.
    """
    batch = ids.repeat(copies, 1)
    if start <= 0 or outputs is None:
        logits: torch.Tensor = run_with_hooks(model, batch, fwd_hooks)
        return logits
    stored = outputs[start - 1]
    resume = stored.expand(copies, *stored.shape[1:]).contiguous()
    blocks = list(bridge_of(model).blocks)[:start]
    with model.lock, torch.no_grad(), released_patterns(bridge_of(model)):
        for block in blocks:  # past the bridge's attribute forwarding, on this instance only
            object.__setattr__(block, "forward", lambda *_args, **_kwargs: resume)
        try:
            resumed: torch.Tensor = bridge_of(model).run_with_hooks(
                batch.to(model_device(model)), fwd_hooks=list(fwd_hooks), return_type="logits"
            )
            return resumed
        finally:
            for block in blocks:
                object.__delattr__(block, "forward")


def run_standalone(hf_model: Any, ids: TokenIds) -> Logits:
    """Logits of a standalone Hugging Face model (not a shared bridge: no lock, no hooks).

    Used for checkpoints the app writes itself, such as a pruned copy of a model.

    Args:
        hf_model: a ``transformers`` model with a language-model head.
        ids: ``batch pos`` token ids.
    """
    device = next(hf_model.parameters()).device
    with torch.no_grad():
        logits: torch.Tensor = hf_model(input_ids=ids.to(device)).logits
    return logits
