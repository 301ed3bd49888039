"""Attention under a bounded KV cache, for every query of a text in one forward pass.

Reading a text token by token with a cache of ``budget`` entries, query ``t`` sees only the keys
its policy kept (``budget`` of them, itself included). Each token's keys and values are computed
once, from its own hidden state at the time, and never change; so the same numbers come out of
one forward pass over the whole text in which every layer's attention lets each query see only
the keys its policy would have kept at that moment. That is what these functions compute
(float32, a block of queries at a time), with the policies:

- ``full``: every earlier key;
- ``window``: the ``budget`` most recent keys;
- ``sinks``: the first ``sinks`` keys plus the ``budget - sinks`` most recent (StreamingLLM).
  Positions are those in the cache, as the paper assigns them: with the cache full, the sinks sit
  at slots ``0 .. sinks-1``, the window after them and the query at slot ``budget - 1``. A real
  implementation caches keys before the rotation and rotates them by slot at every step. With
  RoPE, ``q_t . k_j`` depends only on the slot distance: inside the window it equals the true
  distance (the window is contiguous and ends at the query), so those scores are the ordinary
  ones; a sink's distance shrinks from ``t - s`` to ``budget - 1 - s``, which is the query
  rotated back by ``delta_t = t - budget + 1`` against the sink's ordinary key
  (:class:`RopeShift`). Models without RoPE keep the positions they were computed with (learned
  position embeddings are added to the input and cannot be re-assigned without recomputing);
- ``h2o``: heavy hitters + recent (Zhang et al. 2023): ``budget // 2`` slots for the keys with
  the largest attention accumulated since they entered, the rest for the most recent keys
  (the query included). Per key/value head (a GQA group sums its query heads' weights); keys
  keep their positions. Eviction depends on the attention history, so this one runs query by
  query inside each layer (the rest of the pass stays batched).

A model with learned sinks (gpt-oss) has one more term in every softmax, each head's sink logit,
which no key holds: it takes no slot of the cache and no policy can evict it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import torch

from models.attention.options import AttentionOptions
from models.generate.view import grouped_scores
from models.model.softmax_terms import rotate

Policy = Literal["full", "window", "sinks", "h2o"]
POLICIES: tuple[str, ...] = get_args(Policy)
POLICY_NAMES: dict[str, str] = {
    "full": "full cache",
    "window": "sliding window",
    "sinks": "sinks + window (StreamingLLM)",
    "h2o": "heavy hitters + recent (H2O)",
}
BLOCK = 128  # queries per block


@dataclass(frozen=True)
class RopeShift:
    """Rotates RoPE queries back by a number of positions (``rotate_half`` convention).

    Attributes:
        inv_freq: ``rotary_dim / 2`` float32 frequencies of the model's rotary embedding.
    """

    inv_freq: torch.Tensor

    def back(self, q: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """``head_index query_pos d_head`` queries rotated by ``-delta`` (``query_pos``)."""
        angles = delta.to(torch.float32)[:, None] * self.inv_freq.to(q.device)[None]
        emb = torch.cat([angles, angles], dim=-1)[None]  # 1 pos rotary_dim
        x = q.transpose(0, 1)[None]  # 1 pos head d
        return rotate(x, emb.cos(), -emb.sin())[0].transpose(0, 1)


def _softmax_out(
    scores: torch.Tensor,
    allowed: torch.Tensor,
    values: torch.Tensor,
    terms: AttentionOptions,
    n_kv: int,
    sink: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax of ``head_index query key`` logits and its output with ``kv_head key d``
    values: ``(head_index query d_head output, weights)``. ``sink``: each head's learned sink
    logit, one more softmax term that no key holds (the weights on the keys then sum to less
    than 1)."""
    scores = terms.capped(scores).masked_fill(~allowed, float("-inf"))
    if sink is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        column = sink.to(scores)[:, None, None].expand(*scores.shape[:2], 1)
        weights = torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]
    n_heads, n_q, n_keys = weights.shape
    grouped = weights.reshape(n_kv, -1, n_keys)
    return torch.matmul(grouped, values).reshape(n_heads, n_q, -1), weights


def banded(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    first: int,
    terms: AttentionOptions,
    policy: Policy,
    budget: int,
    sinks: int = 0,
    shift: RopeShift | None = None,
    checkpoints: dict[int, torch.Tensor] | None = None,
    learned_sink: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of every query under ``full``, ``window`` or ``sinks``, a block at a time.

    Args:
        q: ``head_index query_pos d_head`` float32 queries at positions ``first ...``.
        k, v: ``kv_head_index key_pos d_head`` float32 keys/values of positions ``0 ...``.
        first: the position of the first query.
        terms: the layer's scale, soft cap and own window.
        policy: ``full``, ``window`` or ``sinks``.
        budget: keys each query may see (itself included); ignored for ``full``.
        sinks: kept initial keys (``sinks`` policy).
        shift: re-indexes the sinks' positions (``sinks`` on RoPE models), or None.
        checkpoints: ``{B: kv_head x B}`` tensors to which the weights of queries before
            position ``B`` are added (summed over each GQA group); ``full`` only.
        learned_sink: each head's learned sink logit (gpt-oss), or None: a term of every
            softmax that takes no slot of the cache and is never evicted.

    Returns:
        ``head_index query_pos d_head`` float32 outputs.
    """
    n_q, n_kv = q.shape[1], k.shape[0]
    n_sink = sinks if policy == "sinks" else 0
    span = budget - n_sink if policy != "full" else None
    out = torch.empty_like(q)
    for r0 in range(0, n_q, BLOCK):
        r1 = min(r0 + BLOCK, n_q)
        pos = torch.arange(first + r0, first + r1, device=q.device)
        lo = 0 if span is None else max(n_sink, first + r0 - span + 1)
        hi = first + r1
        key_pos = torch.arange(lo, hi, device=q.device)
        allowed = key_pos[None] <= pos[:, None]
        if span is not None:
            allowed &= key_pos[None] > pos[:, None] - span
        if terms.window:
            allowed &= key_pos[None] > pos[:, None] - terms.window
        scores = grouped_scores(q[:, r0:r1], k[:, lo:hi]) * terms.scale_for(q.shape[-1])
        keys_v = v[:, lo:hi]
        if n_sink and lo > 0:
            sink_q = q[:, r0:r1]
            if shift is not None:
                sink_q = shift.back(sink_q, (pos - budget + 1).clamp_min(0))
            sink_pos = torch.arange(min(n_sink, lo), device=q.device)
            sink_ok = sink_pos[None] <= pos[:, None]
            if terms.window:
                sink_ok &= sink_pos[None] > pos[:, None] - terms.window
            sink_scores = grouped_scores(sink_q, k[:, : len(sink_pos)]) * terms.scale_for(
                q.shape[-1]
            )
            scores = torch.cat([sink_scores, scores], dim=-1)
            allowed = torch.cat([sink_ok, allowed], dim=-1)
            keys_v = torch.cat([v[:, : len(sink_pos)], keys_v], dim=1)
        out[:, r0:r1], weights = _softmax_out(
            scores, allowed[None], keys_v, terms, n_kv, learned_sink
        )
        for cut, acc in (checkpoints or {}).items():
            rows = int((pos < cut).sum())
            if rows:
                part = weights[:, :rows, : min(cut, hi)].sum(1)  # head key
                acc[:, : part.shape[-1]] += part.reshape(n_kv, -1, part.shape[-1]).sum(1)
    return out


def heavy_hitters(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    first: int,
    terms: AttentionOptions,
    budget: int,
    accumulated: torch.Tensor | None = None,
    learned_sink: torch.Tensor | None = None,
) -> torch.Tensor:
    """H2O attention of every query (see the module docstring), query by query past the budget.

    Args:
        q, k, v, first, terms: as in :func:`banded`.
        budget: keys each query sees (itself included): ``budget // 2`` heavy, the rest recent.
        accumulated: ``kv_head x first`` attention summed over queries ``0 .. first-1`` when the
            pass starts after a shared prefix (then ``first`` must equal ``budget``); None when
            it starts at position 0.
        learned_sink: as in :func:`banded` (it never competes for a slot).

    Returns:
        ``head_index query_pos d_head`` float32 outputs.
    """
    n_q, d_head, n_kv = q.shape[1], q.shape[2], k.shape[0]
    recent = budget - budget // 2
    out = torch.empty_like(q)
    start = 0
    if first == 0:
        start = min(budget, n_q)
        accumulated = torch.zeros(n_kv, budget, device=q.device)
        out[:, :start] = banded(
            q[:, :start],
            k,
            v,
            0,
            terms,
            "full",
            budget,
            checkpoints={budget: accumulated},
            learned_sink=learned_sink,
        )
    elif accumulated is None or first != budget:
        raise ValueError("a pass after a shared prefix starts at the budget, with its sums")
    if start >= n_q:
        return out
    # The loop runs in NumPy on the CPU: per query it is a dozen operations on a few kilobytes,
    # where torch's per-call overhead (and, on a busy machine, waking a second OpenMP thread)
    # costs more than the arithmetic (measured: 40 us per query and layer instead of 120-190).
    state = H2OState(
        keys=k[:, :budget].cpu().numpy().copy(),
        values=v[:, :budget].cpu().numpy().copy(),
        positions=np.tile(np.arange(budget), (n_kv, 1)),
        scores=accumulated.cpu().numpy().astype(np.float32, copy=True),
    )
    grouped_q = q.cpu().numpy().reshape(n_kv, -1, n_q, d_head)
    sink = None if learned_sink is None else learned_sink.float().cpu().numpy().reshape(n_kv, -1)
    done = _h2o_loop(
        grouped_q, k.cpu().numpy(), v.cpu().numpy(), first, start, terms, recent, state, sink
    )
    out[:, start:] = torch.from_numpy(done).reshape(-1, n_q - start, d_head).to(out.device)
    return out


@dataclass
class H2OState:
    """The bounded cache of one layer, per key/value head: ``budget`` slots of keys, values,
    their positions and their accumulated attention."""

    keys: np.ndarray
    values: np.ndarray
    positions: np.ndarray
    scores: np.ndarray


def _h2o_loop(
    grouped_q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    first: int,
    start: int,
    terms: AttentionOptions,
    recent: int,
    state: H2OState,
    sink: np.ndarray | None = None,
) -> np.ndarray:
    """Queries ``start ..`` one at a time: evict, insert, attend, accumulate (``sink``:
    ``kv_head group`` learned sink logits, a softmax term outside the cache).

    Returns:
        ``kv_head group query_pos d_head`` float32 outputs of those queries.
    """
    n_kv, group, n_q, d_head = grouped_q.shape
    heads = np.arange(n_kv)
    out = np.empty((n_kv, group, n_q - start, d_head), dtype=np.float32)
    scale = np.float32(terms.scale_for(d_head))
    for i in range(start, n_q):
        t = first + i
        slot = np.where(state.positions <= t - recent, state.scores, np.inf).argmin(axis=-1)
        state.keys[heads, slot], state.values[heads, slot] = k[:, t], v[:, t]
        state.positions[heads, slot], state.scores[heads, slot] = t, 0.0
        logits = np.matmul(grouped_q[:, :, i], state.keys.transpose(0, 2, 1)) * scale
        if terms.softcap:
            logits = np.tanh(logits / terms.softcap) * np.float32(terms.softcap)
        if terms.window:
            logits[
                np.broadcast_to((state.positions <= t - terms.window)[:, None], logits.shape)
            ] = -np.inf
        top = logits.max(axis=-1, keepdims=True)
        if sink is not None:
            top = np.maximum(top, sink[..., None])
        weights = np.exp(logits - top)
        total = weights.sum(axis=-1, keepdims=True)
        if sink is not None:
            total += np.exp(sink[..., None] - top)
        weights /= total  # kv group slot
        out[:, :, i - start] = np.matmul(weights, state.values)
        state.scores += weights.sum(axis=1)
    return out
