"""Every head's attention row for the newest query, as the softmax saw it, and how the rows of a
whole generation are kept.

During each forward step :class:`RowRecorder` is the attention handler: the layer's output comes
from transformers' SDPA (what ``generate`` runs); the recorder keeps the layer's newest query and
its new keys as the softmax sees them (rotated by the model on RoPE models, before its attention
is called). After the step, :func:`layer_rows` computes every layer's row at once in float32:
each query head against its shared key/value head (GQA), the layer's own scale, logit
soft-capping, sliding window and learned sinks (a head's sink logit joins the softmax, so the
row over the keys sums to one minus the sink's weight). Causality needs no mask (the newest
query is the last position); a mask the model passes must agree with causality and the window,
or the recorder refuses rather than show rows the model did not use.

Rows are kept the way long prompts keep patterns (:mod:`models.capture.store`): not as
``steps x layers x heads x length`` numbers (SmolLM2, 512 steps at 8k tokens: 4.5 GB in float32)
but as each step's q plus every layer's keys, from which :meth:`RowStore.rows` rebuilds any
step's rows with the very computation that made the live ones (:func:`layer_rows`):
``layers x heads x d_head`` float32 per step and ``layers x kv_heads x d_head`` per token
(SmolLM2: 69 KiB and 23 KiB; 512 steps after 8k tokens: 230 MB instead of 4.5 GB).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float

from models.attention.options import AttentionOptions
from models.generate.view import (
    layer_index,
    learned_sinks,
    mask_is_causal_window,
    model_attention,
)


class RowsUnavailable(RuntimeError):
    """The model's attention has terms the recorder cannot reproduce."""


Sinks = tuple[torch.Tensor | None, ...]  # per layer, each head's learned sink logit (or None)


def layer_rows(
    q: Float[torch.Tensor, "layer head_index d_head"],
    keys: Float[torch.Tensor, "layer kv_head_index key_pos d_head"],
    terms: tuple[AttentionOptions, ...],
    sinks: Sinks = (),
) -> tuple[
    Float[torch.Tensor, "layer head_index key_pos"], Float[torch.Tensor, "layer head_index"]
]:
    """Every layer's row for a query at the last key position, and each row's log-sum-exp.

    One batched product for all layers (each query head against its key/value head), then the
    layer's scale, soft cap and window; float32 throughout. A layer with learned sinks
    (``sinks``) adds each head's sink logit to the log-sum-exp, so its row is the weights on the
    keys and one minus its sum the sink's. Used for the live rows and for rebuilding them, so
    both are the same computation.
    """
    n_layers, n_heads, d_head = q.shape
    n_kv, n_keys = keys.shape[1], keys.shape[2]
    grouped = q.reshape(n_layers * n_kv, n_heads // n_kv, d_head)
    flat_keys = keys.reshape(n_layers * n_kv, n_keys, d_head)
    scores = torch.matmul(grouped, flat_keys.transpose(1, 2)).reshape(n_layers, n_heads, n_keys)
    scales = torch.tensor([t.scale_for(d_head) for t in terms], device=q.device)
    scores = scores * scales.to(scores.dtype)[:, None, None]
    for layer, t in enumerate(terms):
        scores[layer] = t.capped(scores[layer])
    windows = [t.window for t in terms]
    if any(windows):
        distance = (n_keys - 1) - torch.arange(n_keys, device=q.device)
        limit = torch.tensor([w or n_keys + 1 for w in windows], device=q.device)
        scores = scores.masked_fill((distance[None] >= limit[:, None])[:, None], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    for layer, sink in enumerate(sinks):
        if sink is not None:
            lse[layer] = torch.logaddexp(lse[layer], sink.to(lse))
    return torch.exp(scores - lse[..., None]), lse


class RowRecorder:
    """Attention handler that keeps, over a whole generation, what every step's rows need.

    Each forward call writes its new keys (float32) into one buffer per layer and remembers each
    layer's newest query; :meth:`step_rows` then computes all layers' rows in one batched product
    (:func:`layer_rows`). The layer's output is transformers' SDPA, untouched.

    Args:
        n_layers, n_kv_heads, d_head: the model's shape.
        max_len: the most positions the generation will feed.
        device: where the model runs.
    """

    def __init__(
        self, n_layers: int, n_kv_heads: int, d_head: int, max_len: int, device: torch.device
    ) -> None:
        self.keys = torch.zeros(n_layers, n_kv_heads, max_len, d_head, device=device)
        self.length = 0
        self.max_len = max_len
        self.q: list[Any] = [None] * n_layers
        self.terms: list[Any] = [None] * n_layers
        self.sinks: list[torch.Tensor | None] = [None] * n_layers

    def __call__(
        self,
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, Any]:
        out = model_attention(module, query, key, value, attention_mask, **kwargs)
        layer, n_new = layer_index(module), query.shape[2]
        self.sinks[layer] = learned_sinks(kwargs, self.keys.device)
        window, softcap = kwargs.get("sliding_window"), kwargs.get("softcap")
        if attention_mask is not None and not mask_is_causal_window(
            attention_mask, key.shape[2], window
        ):
            raise RowsUnavailable("an attention mask other than causal or a sliding window")
        if self.keys.shape[1] != key.shape[1] or self.keys.shape[-1] != key.shape[-1]:
            # keys as the softmax sees them need not have the model's d_head (latent attention
            # puts the rotated part beside the content part): sized by the first one seen
            shape = (self.keys.shape[0], key.shape[1], self.max_len, key.shape[-1])
            self.keys = torch.zeros(shape, device=self.keys.device)
        self.keys[layer, :, self.length : self.length + n_new] = key[0, :, -n_new:]
        # A copy: a view of the newest row would keep the layer's whole query (every prompt
        # position's) alive until the step ends, 9 MiB a layer for SmolLM2 at 4,000 tokens.
        self.q[layer] = query[0, :, -1].to(self.keys.device, copy=True)
        self.terms[layer] = AttentionOptions(
            causal=True,
            scale=float(kwargs.get("scaling") or query.shape[-1] ** -0.5),
            window=int(window) if window else None,
            softcap=float(softcap) if softcap else None,
        )
        return out

    @property
    def held_sinks(self) -> Sinks:
        """Each layer's learned sink logits, or ``()`` when no layer has them."""
        return tuple(self.sinks) if any(s is not None for s in self.sinks) else ()

    def step_rows(self, n_new: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """After a forward call that fed ``n_new`` positions: ``(q, rows, lse)`` of its newest
        query, ``layer head_index d_head``, ``layer head_index key_pos``, ``layer head_index``.

        Raises:
            RowsUnavailable: a layer's attention never ran through the recorder.
        """
        if any(q is None for q in self.q):
            raise RowsUnavailable("an attention the app cannot intercept")
        self.length += n_new
        q = torch.stack(self.q).float()
        rows, lse = layer_rows(
            q, self.keys[:, :, : self.length], tuple(self.terms), self.held_sinks
        )
        self.q = [None] * len(self.q)
        return q, rows, lse


@dataclass(frozen=True)
class RowStore:
    """Every step's attention rows, rebuilt on demand (see the module docstring).

    Attributes:
        q: ``step layer head_index d_head`` float32 query of each step's newest position.
        keys: ``layer kv_head_index key_pos d_head`` float32 keys of every position fed.
        terms: each layer's scale, window and soft cap.
        first_query: the position of step 0's query (the last prompt token).
        sinks: each layer's learned sink logits (``()`` for a model without them).
    """

    q: np.ndarray
    keys: np.ndarray
    terms: tuple[AttentionOptions, ...]
    first_query: int
    sinks: Sinks = ()

    @property
    def n_steps(self) -> int:
        return int(self.q.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.q.nbytes + self.keys.nbytes)

    def rows(self, step: int) -> Float[np.ndarray, "layer head_index key_pos"]:
        """Step ``step``'s rows over keys ``0 .. first_query + step`` (the live computation)."""
        if not 0 <= step < self.n_steps:
            raise IndexError(f"step {step} of {self.n_steps}")
        n_keys = self.first_query + step + 1
        q = torch.from_numpy(np.array(self.q[step]))
        keys = torch.from_numpy(np.array(self.keys[:, :, :n_keys]))
        return layer_rows(q, keys, self.terms, self.sinks)[0].numpy()

    def dense(self) -> Float[np.ndarray, "step layer head_index key_pos"]:
        """All steps' rows over the whole text (prompt + every written token, the last of
        which no step attends to yet), each zero beyond its own length."""
        n_keys = self.first_query + self.n_steps + 1
        out = np.zeros((self.n_steps, *self.q.shape[1:3], n_keys), dtype=np.float32)
        for step in range(self.n_steps):
            rows = self.rows(step)
            out[step, :, :, : rows.shape[-1]] = rows
        return out


def row_series(rows: torch.Tensor, n_prompt: int) -> tuple[np.ndarray, np.ndarray]:
    """``layer head_index`` attention on position 0 (sink mass) and on the prompt's positions.

    Both arrays own their memory: a NumPy view of ``rows[..., 0]`` would keep the whole step's
    ``layer head_index key_pos`` rows alive (4 MiB a step for SmolLM2 after 4,000 tokens) for
    as long as the step is kept.
    """
    return (
        rows[..., 0].to("cpu", torch.float32).numpy().copy(),
        rows[..., :n_prompt].sum(-1).to("cpu", torch.float32).numpy().copy(),
    )
