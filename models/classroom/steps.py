"""Scaled dot-product attention one step at a time, on small matrices a person can read.

Every intermediate is kept (``Q K^T``, the scaled scores, the masked logits, the row softmax and
``A V``) so a page can print each one. Matrices typed by a user go through :func:`parse_matrix`
and :func:`check_shapes`, which raise :class:`MatrixError` with a message meant for the page.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from models.errors import UserError

MAX_SIZE = 6
EXAMPLES: dict[str, dict[str, str]] = {
    "A": {"q": "1, 2; 0, -1", "k": "2, 0; 1, 1", "v": "10, 20; 30, 40"},
    "B": {"q": "1, 0; 0, 1; 1, 1", "k": "1, 0; 0, 1; 1, 1", "v": "1, 0; 0, 1; 1, 1"},
}


class MatrixError(UserError, ValueError):
    """A typed matrix cannot be used; ``str(err)`` is a message for the user."""


def _quoted(cell: str) -> str:
    """A typed fragment for a message: in a code span, without backticks, at most 40 chars."""
    text = cell.replace("`", "ʹ")
    return f"`{text[:40]}{'…' if len(text) > 40 else ''}`"


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate of ``softmax(Q K^T * scale + mask) V``.

    Attributes:
        q: ``query_pos d_k`` queries.
        k: ``key_pos d_k`` keys.
        v: ``key_pos d_v`` values.
        scores: ``query_pos key_pos`` raw dot products ``Q K^T``.
        scale: the factor applied to the scores (``1 / sqrt(d_k)`` by default).
        scaled: ``query_pos key_pos`` ``scores * scale``.
        visible: ``query_pos key_pos`` True where a query may see a key.
        logits: the capped scores with hidden entries set to ``-inf`` (what the softmax reads).
        weights: ``query_pos key_pos`` the attention pattern; each row sums to 1 (with a
            learned sink, to 1 minus the sink's weight).
        output: ``query_pos d_v`` ``weights @ v``.
        softcap: the logit cap ``c`` (Gemma 2), or None; ``capped`` is then
            ``c * tanh(scaled / c)``, else ``scaled`` itself.
        sink: a learned sink logit (gpt-oss), one more softmax term that no key holds; None.
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray
    scale: float
    scaled: np.ndarray
    visible: np.ndarray
    logits: np.ndarray
    weights: np.ndarray
    output: np.ndarray
    softcap: float | None = None
    capped: np.ndarray | None = None
    sink: float | None = None

    @property
    def sink_weights(self) -> np.ndarray | None:
        """``query_pos`` each row's weight on the learned sink, or None without one."""
        return None if self.sink is None else 1.0 - self.weights.sum(axis=-1)

    @property
    def d_k(self) -> int:
        return int(self.q.shape[1])


def _split_rows(text: str) -> list[str]:
    """Rows of ``"1, 2; 0, -1"``, of one row per line, or of ``[[1, 2], [0, -1]]``."""
    cleaned = text.strip()
    if "[" in cleaned or "]" in cleaned:
        cleaned = re.sub(r"\]\s*,?\s*\[", ";", cleaned).replace("[", "").replace("]", "")
    return [row.strip() for row in re.split(r"[;\n]", cleaned) if row.strip()]


def parse_matrix(text: str, name: str, max_size: int = MAX_SIZE) -> np.ndarray:
    """Read a small matrix typed as rows separated by ``;`` (or new lines), numbers by commas.

    Args:
        text: e.g. ``"1, 2; 0, -1"``.
        name: what to call the matrix in error messages (``"Q"``).
        max_size: most rows and most columns allowed.

    Returns:
        ``rows cols`` float64 array.

    Raises:
        MatrixError: empty text, a non-number, rows of different lengths, too large, not finite.
    """
    rows = _split_rows(text or "")
    if not rows:
        raise MatrixError(f"{name} is empty: type rows such as `1, 2; 0, -1`.")
    values: list[list[float]] = []
    for r, row in enumerate(rows, start=1):
        cells = [c for c in re.split(r"[,\s]+", row) if c]
        parsed = []
        for cell in cells:
            try:
                number = float(cell.replace("−", "-"))
            except ValueError:
                raise MatrixError(f"{name}, row {r}: {_quoted(cell)} is not a number.") from None
            if not math.isfinite(number):
                raise MatrixError(f"{name}, row {r}: {_quoted(cell)} is not a finite number.")
            parsed.append(number)
        if values and len(parsed) != len(values[0]):
            count = f"{len(parsed)} number{'s' if len(parsed) != 1 else ''}"
            raise MatrixError(
                f"{name}: row {r} has {count} but row 1 has "
                f"{len(values[0])}; every row needs the same count."
            )
        values.append(parsed)
    n_rows, n_cols = len(values), len(values[0])
    if n_rows > max_size or n_cols > max_size:
        raise MatrixError(
            f"{name} is {n_rows} × {n_cols}; the classroom takes at most {max_size} × {max_size}."
        )
    return np.array(values, dtype=np.float64)


def check_shapes(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False) -> None:
    """Check that ``Q K^T`` and ``A V`` can be formed.

    Raises:
        MatrixError: Q and K differ in width, K and V differ in length, or a causal mask is asked
            for with a different number of queries and keys.
    """
    if q.shape[1] != k.shape[1]:
        raise MatrixError(
            f"Q has {q.shape[1]} columns but K has {k.shape[1]}: a query and a key "
            "must have the same length d_k to take their dot product."
        )
    if k.shape[0] != v.shape[0]:
        raise MatrixError(
            f"K has {k.shape[0]} rows but V has {v.shape[0]}: every key needs "
            "exactly one value row."
        )
    if causal and q.shape[0] != k.shape[0]:
        raise MatrixError(
            f"The causal mask compares positions, so Q and K need the same number "
            f"of rows (now {q.shape[0]} and {k.shape[0]}). Turn the mask off or "
            "make them equal."
        )


def causal_visible(n_query: int, n_key: int) -> np.ndarray:
    """``query_pos key_pos`` True where key ``j`` is not after query ``i`` (last rows aligned)."""
    offset = n_key - n_query
    return np.tril(np.ones((n_query, n_key), dtype=bool), k=offset)


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Row softmax that accepts ``-inf``; a row with nothing visible becomes all zeros.

    Args:
        logits: ``query_pos key_pos``.

    Returns:
        ``query_pos key_pos`` weights; each row with a finite entry sums to 1.
    """
    logits = np.asarray(logits, dtype=np.float64)
    finite = np.isfinite(logits)
    row_max = np.where(finite, logits, -np.inf).max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    exp = np.where(finite, np.exp(np.where(finite, logits, 0.0) - row_max), 0.0)
    total = exp.sum(axis=-1, keepdims=True)
    weights: np.ndarray = np.divide(exp, total, out=np.zeros_like(exp), where=total > 0)
    return weights


def attention_steps(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    causal: bool = False,
    scale: float | None = None,
    visible: np.ndarray | None = None,
    softcap: float | None = None,
    sink: float | None = None,
) -> AttentionSteps:
    """Compute ``softmax(Q K^T * scale + mask) V`` keeping every intermediate.

    Args:
        q: ``query_pos d_k``.
        k: ``key_pos d_k``.
        v: ``key_pos d_v``.
        causal: hide keys after each query (``-inf`` before the softmax).
        scale: factor on the scores; ``None`` means ``1 / sqrt(d_k)``.
        visible: an explicit ``query_pos key_pos`` mask (True = visible), combined with causal.
        softcap: cap the scaled scores at ``c * tanh(s / c)`` before the softmax (Gemma 2).
        sink: a learned sink logit that joins every row's softmax (gpt-oss).

    Returns:
        The :class:`AttentionSteps`.
    """
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    check_shapes(q, k, v, causal=False)
    scale = 1.0 / math.sqrt(q.shape[1]) if scale is None else float(scale)
    with np.errstate(over="ignore", invalid="ignore"):
        scores = q @ k.T
        scaled = scores * scale
    if not np.isfinite(scaled).all():
        raise MatrixError(
            "Q Kᵀ overflows: some scores are larger than a float64 can hold "
            "(about 1.8e308), so the softmax would divide infinity by infinity. "
            "Use smaller numbers."
        )
    seen = np.ones(scores.shape, dtype=bool) if visible is None else np.asarray(visible, bool)
    if causal:
        seen = seen & causal_visible(*scores.shape)
    capped = scaled if softcap is None else softcap * np.tanh(scaled / softcap)
    logits = np.where(seen, capped, -np.inf)
    if sink is None:
        weights = softmax_rows(logits)
    else:  # the sink's column joins the softmax and is dropped after it
        column = np.full((logits.shape[0], 1), float(sink))
        weights = softmax_rows(np.concatenate([logits, column], axis=1))[:, :-1]
    output = weights @ v  # rows of A sum to at most 1: a mix of V's finite rows stays finite
    return AttentionSteps(
        q=q,
        k=k,
        v=v,
        scores=scores,
        scale=scale,
        scaled=scaled,
        visible=seen,
        logits=logits,
        weights=weights,
        output=output,
        softcap=softcap,
        capped=capped if softcap is not None else None,
        sink=None if sink is None else float(sink),
    )


def steps_from_text(q_text: str, k_text: str, v_text: str, causal: bool = False) -> AttentionSteps:
    """Parse three typed matrices and run :func:`attention_steps` (raises :class:`MatrixError`)."""
    q = parse_matrix(q_text, "Q")
    k = parse_matrix(k_text, "K")
    v = parse_matrix(v_text, "V")
    check_shapes(q, k, v, causal=causal)
    return attention_steps(q, k, v, causal=causal)
