"""Every head's attention row for the newest query, as the softmax saw it, and how the rows of a
whole generation are kept.

During each forward step :class:`RowRecorder` is the attention handler: the layer's output comes
from transformers' SDPA (what ``generate`` runs), and beside it the recorder computes, in
float32, the newest query's row over every key in the cache: rotated q and k (RoPE applied by
the model before its attention is called), each query head against its shared key/value head
(GQA), the layer's own scale, logit soft-capping, the attention mask's last row and the layer's
sliding window. Causality needs no mask: the newest query is the last position.

Rows are kept the way long prompts keep patterns (:mod:`models.capture.store`): not as
``steps x layers x heads x length`` numbers (SmolLM2, 512 steps at 8k tokens: 4.5 GB in float32)
but as each step's q and row log-sum-exp plus every layer's keys, from which
:meth:`RowStore.rows` rebuilds any step's rows exactly (``exp(q k^T * scale - lse)``, masked):
``layers x heads x (d_head + 1)`` float32 per step and ``layers x kv_heads x d_head`` per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float

from models.generate.view import UNSUPPORTED_KWARGS, grouped_scores, layer_index, sdpa


class RowsUnavailable(RuntimeError):
    """The model's attention has terms the recorder cannot reproduce."""


def allowed_keys(key_pos: torch.Tensor, query_pos: int, window: int | None) -> torch.Tensor:
    """``key_pos`` boolean: keys a query at ``query_pos`` may see (causal, sliding window)."""
    ok = key_pos <= query_pos
    if window:
        ok &= key_pos > query_pos - int(window)
    return ok


def row_scores(
    q: torch.Tensor, k: torch.Tensor, scale: float, softcap: float | None
) -> torch.Tensor:
    """``head_index key_pos`` float32 logits of one query per head (``head_index d_head``)
    against ``kv_head_index key_pos d_head`` keys."""
    scores = grouped_scores(q[:, None].float(), k.float())[:, 0] * scale
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    return scores


class RowRecorder:
    """Attention handler that keeps the newest query's row in every layer (one forward call).

    After the call: ``rows[layer]`` is ``head_index key_pos`` float32 over absolute positions
    ``0..query_pos``, ``q`` / ``lse`` what the store keeps, ``new_keys`` the keys this call
    added (float32, on the CPU).
    """

    def __init__(self, n_layers: int, query_pos: int) -> None:
        self.query_pos = query_pos
        self.rows: list[Any] = [None] * n_layers
        self.q: list[Any] = [None] * n_layers
        self.lse: list[Any] = [None] * n_layers
        self.new_keys: list[Any] = [None] * n_layers
        self.terms: list[Any] = [None] * n_layers  # (scale, window, softcap) per layer

    def __call__(
        self,
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, Any]:
        if any(kwargs.get(name) is not None for name in UNSUPPORTED_KWARGS):
            raise RowsUnavailable("learned attention-sink logits")
        out = sdpa(module, query, key, value, attention_mask, **kwargs)
        layer = layer_index(module)
        scale = float(kwargs.get("scaling") or query.shape[-1] ** -0.5)
        window, softcap = kwargs.get("sliding_window"), kwargs.get("softcap")
        n_keys, n_new = key.shape[2], query.shape[2]
        key_pos = torch.arange(self.query_pos - n_keys + 1, self.query_pos + 1, device=key.device)
        q = query[0, :, -1].float()
        scores = row_scores(q, key[0], scale, softcap)
        ok = allowed_keys(key_pos, self.query_pos, window)[None]
        if attention_mask is not None:
            last = attention_mask[0, :, -1]
            ok = ok & (last if last.dtype == torch.bool else last > float("-inf"))
        scores = scores.masked_fill(~ok, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)
        row = torch.exp(scores - lse[:, None])
        full = torch.zeros(row.shape[0], self.query_pos + 1, device=row.device)
        full[:, self.query_pos - n_keys + 1 :] = row
        self.rows[layer], self.q[layer], self.lse[layer] = full, q, lse
        self.new_keys[layer] = key[0, :, -n_new:].detach().to("cpu", torch.float32)
        self.terms[layer] = (
            scale,
            int(window) if window else None,
            float(softcap) if softcap else None,
        )
        return out


@dataclass(frozen=True)
class RowStore:
    """Every step's attention rows, rebuilt on demand (see the module docstring).

    Attributes:
        q: ``step layer head_index d_head`` float32 query of each step's newest position.
        lse: ``step layer head_index`` float32 log-sum-exp of each row.
        keys: ``layer kv_head_index key_pos d_head`` float32 keys of every position fed.
        scales, windows, softcaps: each layer's logit scale, sliding window and soft cap.
        first_query: the position of step 0's query (the last prompt token).
    """

    q: np.ndarray
    lse: np.ndarray
    keys: np.ndarray
    scales: tuple[float, ...]
    windows: tuple[int | None, ...]
    softcaps: tuple[float | None, ...]
    first_query: int

    @property
    def n_steps(self) -> int:
        return int(self.q.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.q.nbytes + self.lse.nbytes + self.keys.nbytes)

    def rows(self, step: int) -> Float[np.ndarray, "layer head_index key_pos"]:
        """Step ``step``'s rows over keys ``0 .. first_query + step``."""
        pos = self.first_query + step
        key_pos = torch.arange(pos + 1)
        out = []
        for layer in range(self.q.shape[1]):
            q = torch.from_numpy(np.array(self.q[step, layer]))
            k = torch.from_numpy(np.array(self.keys[layer, :, : pos + 1]))
            scores = row_scores(q, k, self.scales[layer], self.softcaps[layer])
            lse = torch.from_numpy(np.array(self.lse[step, layer]))
            row = torch.exp(scores - lse[:, None])
            ok = allowed_keys(key_pos, pos, self.windows[layer])
            out.append(row.masked_fill(~ok[None], 0.0).numpy())
        return np.stack(out)

    def dense(self) -> Float[np.ndarray, "step layer head_index key_pos"]:
        """All steps' rows, each zero beyond its length (``first_query + n_steps`` keys)."""
        n_keys = self.first_query + self.n_steps
        out = np.zeros((self.n_steps, *self.q.shape[1:3], n_keys), dtype=np.float32)
        for step in range(self.n_steps):
            rows = self.rows(step)
            out[step, :, :, : rows.shape[-1]] = rows
        return out


def row_series(rows: torch.Tensor, n_prompt: int) -> tuple[np.ndarray, np.ndarray]:
    """``layer head_index`` attention on position 0 (sink mass) and on the prompt's positions."""
    return (
        rows[..., 0].to("cpu", torch.float32).numpy(),
        rows[..., :n_prompt].sum(-1).to("cpu", torch.float32).numpy(),
    )
