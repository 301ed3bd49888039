"""Run a prompt through a loaded model and keep every head's attention pattern.

The result, :class:`AttentionRun`, holds only NumPy arrays and plain Python values, so it can be
cached and shared between sessions without holding the model or an ActivationCache.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np
import torch

from models.facts import ModelFacts
from models.loading import LoadedModel
from models.pattern_store import (DensePatterns, FactoredPatterns, PatternStore, iter_layers,
                                  read_only)
from models.tokens import readable_tokens

MAX_PROMPT_CHARS = 200_000
DENSE_LIMIT_BYTES = 192 * 1024**2


class PromptError(ValueError):
    """The prompt cannot be run; ``str(err)`` is a message for the user."""


@dataclass(frozen=True)
class AttentionRun:
    """Every head's attention on one prompt.

    Attributes:
        prompt: the text as typed.
        token_ids: ids fed to the model, special tokens included.
        tokens: readable label of each position.
        store: the patterns, held whole or rebuilt on demand (see :mod:`models.pattern_store`).
        facts: the model's shape and attention behaviour.
        first_is_special: position 0 is a BOS / [CLS] token the tokenizer added.
        n_prompt_tokens: how many tokens the full prompt had before truncation.
    """

    prompt: str
    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    store: PatternStore
    facts: ModelFacts
    first_is_special: bool
    n_prompt_tokens: int

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def truncated(self) -> bool:
        return self.n_prompt_tokens > self.n_tokens

    @property
    def factored(self) -> bool:
        return isinstance(self.store, FactoredPatterns)

    @property
    def patterns(self) -> np.ndarray:
        """The whole ``layer head_index query_pos key_pos`` stack (built if factored: large)."""
        if isinstance(self.store, DensePatterns):
            return self.store.stack
        return np.stack(list(self.iter_layers()))

    def layer_patterns(self, layer: int) -> np.ndarray:
        """``head_index query_pos key_pos`` patterns of one layer."""
        return self.store.layer(layer)

    def iter_layers(self) -> Iterator[np.ndarray]:
        """Layer after layer, holding one at a time: for streaming analyses of long prompts."""
        return iter_layers(self.store, self.facts.n_layers)

    def pattern(self, layer: int, head: int) -> np.ndarray:
        """``query_pos key_pos`` pattern of one head."""
        return self.store.window(layer, head, slice(None), slice(None))

    def window(self, layer: int, head: int, rows: slice, cols: slice) -> np.ndarray:
        """Part of one head's pattern: ``rows`` queries by ``cols`` keys."""
        return self.store.window(layer, head, rows, cols)

    def labels(self) -> list[str]:
        """Axis labels ``(i) token`` that stay distinct when a token repeats."""
        return [f"({i}) {tok}" for i, tok in enumerate(self.tokens)]


def tokenize(model: LoadedModel, prompt: str, max_tokens: int | None = None
             ) -> tuple[torch.Tensor, int]:
    """Token ids ``(1, pos)`` for ``prompt``, cut to the model's context, and the uncut length.

    An encoder's closing special token ([SEP]) is kept at the end when the text is cut.
    """
    if not prompt or not prompt.strip():
        raise PromptError("The prompt is empty: type some text to see its attention.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise PromptError(f"The prompt has {len(prompt):,} characters; the limit is "
                          f"{MAX_PROMPT_CHARS:,}. Paste a shorter passage.")
    ids = model.bridge.to_tokens(prompt, truncate=False).cpu()
    n_full = ids.shape[1]
    limit = min(model.facts.n_ctx, max_tokens or model.facts.n_ctx)
    if n_full > limit:
        sep = getattr(model.tokenizer, "sep_token_id", None)
        if sep is not None and int(ids[0, -1]) == sep:
            ids = torch.cat([ids[:, : limit - 1], ids[:, -1:]], dim=1)
        else:
            ids = ids[:, :limit]
    return ids, n_full


@contextmanager
def released_patterns(bridge) -> Iterator[None]:
    """Drop each attention module's copy of its pattern as soon as the module returns.

    TransformerLens keeps the last pattern on every attention module (``_pattern``): at 2,048
    tokens that is 200 MB per GPT-2-small layer, all alive at the end of the pass. Forward hooks
    clear it layer by layer; they are removed again when the pass is over.
    """
    handles = [module.register_forward_hook(lambda mod, _inputs, _out: setattr(mod, "_pattern",
                                                                                None))
               for module in bridge.modules() if hasattr(module, "_pattern")]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def run_hooks(model: LoadedModel, ids: torch.Tensor, hook_names: Iterable[str]
              ) -> dict[str, torch.Tensor]:
    """Forward ``ids`` once under the model's lock; return the named activations on CPU, fp32."""
    wanted = set(hook_names)
    device = model.bridge.cfg.device or "cpu"
    with model.lock, torch.no_grad(), released_patterns(model.bridge):
        _, cache = model.bridge.run_with_cache(ids.to(device), names_filter=lambda n: n in wanted)
        out = {name: cache[name].detach().to("cpu", torch.float32) for name in wanted}
    return out


def qk_hooks(hook_dict, layer: int) -> tuple[str, str]:
    """Names of the hooks holding layer ``layer``'s q and k as the softmax sees them.

    Rotary models expose q and k after the rotation as ``hook_rot_q`` / ``hook_rot_k``;
    ``hook_q`` / ``hook_k`` hold them before it.
    """
    prefix = f"blocks.{layer}.attn."
    if prefix + "hook_rot_q" in hook_dict and prefix + "hook_rot_k" in hook_dict:
        return prefix + "hook_rot_q", prefix + "hook_rot_k"
    return prefix + "hook_q", prefix + "hook_k"


def pattern_hooks(n_layers: int) -> list[str]:
    return [f"blocks.{layer}.attn.hook_pattern" for layer in range(n_layers)]


def dense_bytes(facts: ModelFacts, n_tokens: int) -> int:
    return facts.n_layers * facts.n_heads * n_tokens * n_tokens * 4


def capture_dense(model: LoadedModel, ids: torch.Tensor) -> DensePatterns:
    """Every layer's ``hook_pattern``, stacked."""
    names = pattern_hooks(model.facts.n_layers)
    acts = run_hooks(model, ids, names)
    return DensePatterns(read_only(np.stack([acts[name][0].numpy() for name in names])))


def capture(model: LoadedModel, prompt: str, max_tokens: int | None = None,
            dense_limit: int = DENSE_LIMIT_BYTES) -> AttentionRun:
    """Every head's pattern on ``prompt``.

    Patterns are held whole when they take at most ``dense_limit`` bytes; longer prompts keep q,
    k and the log-sum-exp instead (:func:`models.factored_capture.capture_factored`), falling
    back to a shorter dense capture where the model's q and k do not reproduce its scores.

    Args:
        model: a loaded model.
        prompt: the text; special tokens are added as the model's tokenizer does.
        max_tokens: an optional cap below the model's context length.
        dense_limit: the most bytes the full pattern stack may take.

    Returns:
        An :class:`AttentionRun`.

    Raises:
        PromptError: for an empty or oversized prompt.
    """
    from models.factored_capture import capture_factored

    ids, n_full = tokenize(model, prompt, max_tokens)
    store: PatternStore | None = None
    if dense_bytes(model.facts, ids.shape[1]) > dense_limit:
        store = capture_factored(model, ids)
        if store is None:  # q/k hooks do not rebuild the scores: keep what fits whole
            fits = int((dense_limit / dense_bytes(model.facts, 1)) ** 0.5)
            ids = ids[:, :fits]
    if store is None:
        store = capture_dense(model, ids)
    id_list = [int(i) for i in ids[0]]
    special = set(getattr(model.tokenizer, "all_special_ids", []) or [])
    return AttentionRun(
        prompt=prompt,
        token_ids=tuple(id_list),
        tokens=tuple(readable_tokens(model.tokenizer, id_list)),
        store=store,
        facts=model.facts,
        first_is_special=id_list[0] in special,
        n_prompt_tokens=n_full,
    )
