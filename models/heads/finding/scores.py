"""Head scores as pure functions over attention patterns.

Every function takes a pattern stack whose last two axes are ``query_pos key_pos`` (leading axes,
such as ``layer head_index``, are kept) and returns one number per head. Positions are
zero-based; ``A[i, j]`` is the weight query ``i`` puts on key ``j``. A score that has no query to
average over is NaN, never a made-up 0. A score converts only the entries it reads to float64
(sums run in float64), so a large float32 stack is never copied whole at double precision.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

DEFAULT_SINK_EPS = 0.3
DEFAULT_MIN_SINK_QUERIES = 4


def _as_float(values: np.ndarray) -> npt.NDArray[np.float64]:
    return np.asarray(values, dtype=np.float64)


def _mean_last(values: np.ndarray) -> np.ndarray:
    """The mean over the last axis, in float64."""
    out: np.ndarray = _as_float(values).mean(axis=-1)
    return out


def induction_score(pattern: np.ndarray, seq_len: int, prefix_len: int = 1) -> np.ndarray:
    """How much second-half queries attend to the token after their earlier copy.

    For ``[prefix, r_1..r_L, r_1..r_L]`` with ``p = prefix_len`` and ``L = seq_len``::

        induction = (1 / L) * sum_{q = p + L}^{p + 2L - 1} A[q, q - L + 1]

    Only the L second-half queries count; first-half rows have no earlier copy to look at.

    Args:
        pattern: ``... query_pos key_pos`` with at least ``p + 2L`` positions.
        seq_len: L, the length of the random span.
        prefix_len: tokens before the first span (1 for a BOS or [CLS], 0 for none).

    Returns:
        ``...`` scores in [0, 1].
    """
    pattern = np.asarray(pattern)
    if seq_len < 1 or pattern.shape[-2] < prefix_len + 2 * seq_len:
        raise ValueError(
            f"pattern of {pattern.shape[-2]} positions is too short for "
            f"prefix {prefix_len} + 2 x {seq_len} tokens"
        )
    queries = np.arange(prefix_len + seq_len, prefix_len + 2 * seq_len)
    return _mean_last(pattern[..., queries, queries - seq_len + 1])


def previous_token_score(pattern: np.ndarray) -> np.ndarray:
    """Mean attention to the immediately preceding token.

    ``previous = (1 / (n - 1)) * sum_{i=1}^{n-1} A[i, i - 1]``; NaN for a one-token pattern.

    Args:
        pattern: ``... query_pos key_pos``.
    """
    pattern = np.asarray(pattern)
    n = pattern.shape[-2]
    if n < 2:
        return np.full(pattern.shape[:-2], np.nan)
    rows = np.arange(1, n)
    return _mean_last(pattern[..., rows, rows - 1])


def current_token_score(pattern: np.ndarray, first_query: int = 1) -> np.ndarray:
    """Mean attention a token pays to itself.

    ``current = (1 / (n - f)) * sum_{i=f}^{n-1} A[i, i]`` with ``f = first_query``. The default
    ``f = 1`` leaves out row 0: under a causal mask it can only see itself, so ``A[0, 0] = 1``
    for every head and would inflate the score on short prompts.

    Args:
        pattern: ``... query_pos key_pos``.
        first_query: the first query row counted.
    """
    pattern = np.asarray(pattern)
    n = pattern.shape[-2]
    if n <= first_query:
        return np.full(pattern.shape[:-2], np.nan)
    rows = np.arange(first_query, n)
    return _mean_last(pattern[..., rows, rows])


ROW_CHUNK_VALUES = 2**21
"""Most pattern entries a row-wise score converts to float64 at once (16 MiB)."""


def _row_chunks(pattern: np.ndarray, first_query: int) -> list[slice]:
    """Query rows ``first_query..n-1`` in chunks of at most :data:`ROW_CHUNK_VALUES` entries
    over every leading axis, so a whole float64 copy of the stack is never made."""
    n = pattern.shape[-2]
    per_row = max(1, pattern[..., 0, :].size)
    size = max(1, ROW_CHUNK_VALUES // per_row)
    return [slice(start, min(start + size, n)) for start in range(first_query, n, size)]


def row_score_bytes(n_heads: int, n_queries: int, n_keys: int) -> int:
    """Bytes the row-wise scores (:func:`entropy_score`, :func:`distance_score`) hold at once for
    a ``head_index query_pos key_pos`` stack: two float64 copies of one chunk of rows."""
    per_row = n_heads * n_keys
    return 2 * 8 * min(per_row * n_queries, max(per_row, ROW_CHUNK_VALUES))


def entropy_score(pattern: np.ndarray, learned_sink: bool = False) -> np.ndarray:
    """Mean entropy of the query rows, in nats.

    ``entropy = (1 / (n - 1)) * sum_{i=1}^{n-1} -sum_j A[i, j] ln A[i, j]`` with ``0 ln 0 = 0``.
    Row 0 is left out, as in :func:`current_token_score`: under a causal mask it holds one weight
    of 1 (entropy 0) in every head. A row spread evenly over ``m`` keys scores ``ln m``; a row
    on a single key scores 0. NaN for a one-token pattern.

    Args:
        pattern: ``... query_pos key_pos``.
        learned_sink: the heads have learned sinks (:mod:`models.model.variants.sinks`), so
            each row's keys hold ``1 - s_i`` and the sink the rest: the entropy is over the
            full row, ``-s_i ln s_i`` added with ``s_i = 1 - sum_j A[i, j]``.

    Returns:
        ``...`` entropies in nats.
    """
    pattern = np.asarray(pattern)
    n = pattern.shape[-2]
    if n < 2:
        return np.full(pattern.shape[:-2], np.nan)
    total = np.zeros(pattern.shape[:-2])
    for rows in _row_chunks(pattern, 1):
        weights = _as_float(pattern[..., rows, :])
        logs = np.log(weights, out=np.zeros_like(weights), where=weights > 0)
        total -= np.einsum("...qk,...qk->...", weights, logs)
        if learned_sink:
            sink = np.clip(1.0 - weights.sum(axis=-1), 0.0, 1.0)
            total -= (sink * np.log(sink, out=np.zeros_like(sink), where=sink > 0)).sum(axis=-1)
    mean: np.ndarray = total / (n - 1)
    return mean


def learned_sink_score(pattern: np.ndarray) -> np.ndarray:
    """Mean weight on a head's learned sink over every query: ``mean_i (1 - sum_j A[i, j])``.

    The patterns of a head with a learned sink hold the weights on the keys only
    (:mod:`models.model.variants.sinks`), so what a row lacks of 1 went to the sink.

    Args:
        pattern: ``... query_pos key_pos``.

    Returns:
        ``...`` mean sink weights.
    """
    total = np.zeros(np.asarray(pattern).shape[:-2])
    for rows in _row_chunks(pattern, 0):
        total += (1.0 - _as_float(pattern[..., rows, :]).sum(axis=-1)).sum(axis=-1)
    mean: np.ndarray = total / pattern.shape[-2]
    return mean


def distance_score(pattern: np.ndarray) -> np.ndarray:
    """Mean attention-weighted distance from each query back to its keys, in tokens.

    ``distance = (1 / (n - 1)) * sum_{i=1}^{n-1} sum_j A[i, j] * (i - j)``. Under a causal mask
    every key is at or before its query, so the distance is at least 0: 1 for a
    previous-token head, 0 for a head that attends to itself, about ``(i - 1) / 2`` averaged
    for a head spread evenly. Without a mask (an encoder such as BERT) keys after the query
    count with a negative offset: the score is the mean signed offset, positive when a head
    looks back on balance, negative when it looks ahead, and 0 for a head whose looks back
    and ahead balance out (read it with the entropy). Row 0 is left out as in
    :func:`entropy_score`. NaN for a one-token pattern.

    Args:
        pattern: ``... query_pos key_pos``.

    Returns:
        ``...`` distances in tokens.
    """
    pattern = np.asarray(pattern)
    n, n_keys = pattern.shape[-2], pattern.shape[-1]
    if n < 2:
        return np.full(pattern.shape[:-2], np.nan)
    keys = np.arange(n_keys, dtype=np.float64)
    total = np.zeros(pattern.shape[:-2])
    for rows in _row_chunks(pattern, 1):
        weights = _as_float(pattern[..., rows, :])
        queries = np.arange(rows.start, rows.stop, dtype=np.float64)
        total += (weights.sum(axis=-1) * queries - weights @ keys).sum(axis=-1)
    mean: np.ndarray = total / (n - 1)
    return mean


def duplicate_mask(token_ids: Sequence[int]) -> np.ndarray:
    """``query_pos key_pos`` boolean: ``D[i, j]`` when ``j < i`` and ``token[j] == token[i]``."""
    ids = np.asarray(token_ids)
    same = ids[:, None] == ids[None, :]
    return np.tril(same, k=-1)


def duplicate_token_score(pattern: np.ndarray, token_ids: Sequence[int]) -> np.ndarray:
    """Attention from a token to its earlier copies.

    With ``D[i, j] = 1`` when ``j < i`` and ``token[j] == token[i]``, and ``Q`` the queries that
    have at least one earlier copy::

        duplicate = (1 / |Q|) * sum_{i in Q} sum_j A[i, j] * D[i, j]

    NaN when no token repeats (``Q`` is empty).

    Args:
        pattern: ``... query_pos key_pos``.
        token_ids: the ``query_pos`` token ids the pattern was computed on.
    """
    pattern = np.asarray(pattern)
    dup = duplicate_mask(token_ids)
    if dup.shape != pattern.shape[-2:]:
        raise ValueError(f"{len(dup)} token ids for a pattern of shape {pattern.shape[-2:]}")
    queries = np.flatnonzero(dup.any(axis=-1))
    if not len(queries):
        return np.full(pattern.shape[:-2], np.nan)
    rows = pattern[..., queries, :]  # only the queries that have a copy
    on_copies = np.where(dup[queries], rows, 0).sum(axis=-1, dtype=np.float64)
    return _mean_last(on_copies)


def induction_targets(token_ids: Sequence[int]) -> np.ndarray:
    """``query_pos`` key each query's induction attention should go to, or -1.

    For query ``i`` whose token appeared before, the key is ``j + 1`` where ``j < i`` is the
    most recent earlier position holding the same token (the token that followed it last time).
    Queries with no earlier copy, or whose target is themselves (``j + 1 == i``), get -1.
    """
    last: dict[int, int] = {}
    targets = np.full(len(token_ids), -1)
    for i, token in enumerate(int(t) for t in token_ids):
        j = last.get(token)
        if j is not None and j + 1 < i:
            targets[i] = j + 1
        last[token] = i
    return targets


def text_induction_score(pattern: np.ndarray, token_ids: Sequence[int]) -> np.ndarray:
    """Induction on natural text: mean weight on the token after the previous copy.

    ``(1 / |Q|) * sum_{i in Q} A[i, target(i)]`` with ``target`` from
    :func:`induction_targets` and ``Q`` the queries that have one; NaN when ``Q`` is empty.

    Args:
        pattern: ``... query_pos key_pos``.
        token_ids: the ``query_pos`` token ids.
    """
    pattern = np.asarray(pattern)
    targets = induction_targets(token_ids)
    queries = np.flatnonzero(targets >= 0)
    if not len(queries):
        return np.full(pattern.shape[:-2], np.nan)
    return _mean_last(pattern[..., queries, targets[queries]])


def sink_query_mask(n: int, causal: bool) -> np.ndarray:
    """``query_pos key_pos`` boolean: the queries counted for each key's sink score.

    A key is judged by the queries other than itself that may attend to it: ``t > k`` under a
    causal mask, every ``t != k`` without one. For key 0 this is ``t >= 1`` either way, so the
    first row (forced to 1.0 on key 0 in a causal model) never counts.
    """
    rows, cols = np.indices((n, n))
    return rows > cols if causal else rows != cols


def sink_alphas(pattern: np.ndarray, causal: bool) -> np.ndarray:
    """Sink score of every key position (Gu et al. 2024, first row excluded).

    ``alpha_k = mean over queries t in S_k of A[t, k]`` with ``S_k = {t > k}`` (causal) or
    ``{t != k}`` (bidirectional). NaN for a key no other query can see.

    Args:
        pattern: ``... query_pos key_pos``.
        causal: whether the model masks future keys.

    Returns:
        ``... key_pos`` alphas.
    """
    pattern = np.asarray(pattern)
    counted = sink_query_mask(pattern.shape[-1], causal)
    n_queries = counted.sum(axis=0)
    total = np.where(counted, pattern, 0).sum(axis=-2, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_queries > 0, total / np.maximum(n_queries, 1), np.nan)


def sink_score(pattern: np.ndarray, causal: bool, key: int = 0) -> np.ndarray:
    """``alpha_key`` for every head; ``key = 0`` is the first token (BOS / [CLS]).

    Args:
        pattern: ``... query_pos key_pos``.
        causal: whether the model masks future keys.
        key: the key position.
    """
    pattern = np.asarray(pattern)
    counted = np.flatnonzero(sink_query_mask(pattern.shape[-1], causal)[:, key])
    if not len(counted):
        return np.full(pattern.shape[:-2], np.nan)
    return _mean_last(pattern[..., counted, key])


def top_sink(
    alphas: np.ndarray, causal: bool, min_queries: int = DEFAULT_MIN_SINK_QUERIES
) -> tuple[np.ndarray, np.ndarray]:
    """The key with the largest alpha per head, among keys enough queries can see.

    Under a causal mask a late key is seen by few queries, so one previous-token glance would
    give it alpha 1.0; only keys seen by at least ``min(min_queries, n - 1)`` queries compete.

    Args:
        alphas: ``... key_pos`` from :func:`sink_alphas`.
        causal: whether the model masks future keys.
        min_queries: fewest counted queries a key needs.

    Returns:
        ``(position, alpha)``, each of shape ``...``.
    """
    n = alphas.shape[-1]
    seen_by = sink_query_mask(n, causal).sum(axis=0)
    eligible = seen_by >= max(1, min(min_queries, n - 1))
    masked = np.where(eligible & ~np.isnan(alphas), alphas, -np.inf)
    position = masked.argmax(axis=-1)
    best = np.take_along_axis(masked, position[..., None], axis=-1)[..., 0]
    return position, np.where(np.isfinite(best), best, np.nan)


def flag(values: np.ndarray, threshold: float) -> np.ndarray:
    """Heads whose score is strictly above ``threshold``; NaN scores are never flagged."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.isnan(values), False, values > threshold)
