"""What one attention layer costs: FLOPs per forward pass and the memory of the KV cache.

FLOPs count a multiply-add as 2. For multi-head attention with ``n_heads * d_head = d_model`` the
breakdown sums to the textbook ``8 n d^2 + 4 n^2 d``; with fewer key/value heads (GQA, MQA) the K
and V projections shrink. The softmax (``O(n^2)`` exponentials) is left out, as is usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np

Part = Literal["q_proj", "k_proj", "v_proj", "qk", "av", "out_proj"]
PART_NAMES: dict[str, str] = {
    "q_proj": "Q projection",
    "k_proj": "K projection",
    "v_proj": "V projection",
    "qk": "Q K^T",
    "av": "A V",
    "out_proj": "output projection",
}
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "fp16 / bf16": 2, "fp8 / int8": 1}
MAX_SEQ = 131_072


@dataclass(frozen=True)
class AttentionConfig:
    """The sizes that decide an attention layer's cost.

    Attributes:
        n_layers: transformer blocks.
        d_model: residual width.
        n_heads: query heads (h).
        n_kv_heads: key/value heads (g): h for MHA, 1 for MQA, in between for GQA.
        d_head: width of one head.
    """

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int

    def problems(self) -> list[str]:
        """Messages for the user; empty when the config is usable."""
        out = []
        if min(self.n_layers, self.d_model, self.n_heads, self.n_kv_heads, self.d_head) < 1:
            out.append("Every size must be at least 1.")
        elif self.n_heads % self.n_kv_heads:
            out.append(
                f"{self.n_heads} query heads cannot be split evenly into "
                f"{self.n_kv_heads} key/value groups."
            )
        return out


PRESETS: dict[str, AttentionConfig] = {
    "Llama-2-7B-like (MHA)": AttentionConfig(32, 4096, 32, 32, 128),
    "70B-like (GQA, 8 KV heads)": AttentionConfig(80, 8192, 64, 8, 128),
    "MQA example (1 KV head)": AttentionConfig(32, 4096, 32, 1, 128),
}


@overload
def attention_flops(n: int, cfg: AttentionConfig) -> dict[str, int]: ...
@overload
def attention_flops(n: np.ndarray, cfg: AttentionConfig) -> dict[str, np.ndarray]: ...
def attention_flops(n: int | np.ndarray, cfg: AttentionConfig) -> dict[str, Any]:
    """FLOPs of one self-attention layer on ``n`` tokens (batch 1), part by part.

    Args:
        n: sequence length: an int (exact integer result) or an array of lengths (float64, so
            large configs cannot overflow).
        cfg: the layer's sizes.

    Returns:
        ``{part: flops}`` for the keys of :data:`PART_NAMES`.
    """
    n = n if isinstance(n, int) else np.asarray(n, dtype=np.float64)
    q_width = cfg.n_heads * cfg.d_head
    kv_width = cfg.n_kv_heads * cfg.d_head
    return {
        "q_proj": 2 * n * cfg.d_model * q_width,
        "k_proj": 2 * n * cfg.d_model * kv_width,
        "v_proj": 2 * n * cfg.d_model * kv_width,
        "qk": 2 * n * n * q_width,
        "av": 2 * n * n * q_width,
        "out_proj": 2 * n * q_width * cfg.d_model,
    }


@overload
def linear_and_quadratic(n: int, cfg: AttentionConfig) -> tuple[int, int]: ...
@overload
def linear_and_quadratic(n: np.ndarray, cfg: AttentionConfig) -> tuple[np.ndarray, np.ndarray]: ...
def linear_and_quadratic(n: int | np.ndarray, cfg: AttentionConfig) -> tuple[Any, Any]:
    """The projection FLOPs (grow like n) and the score FLOPs (``Q K^T`` + ``A V``, like n^2)."""
    parts = attention_flops(n, cfg)
    linear = parts["q_proj"] + parts["k_proj"] + parts["v_proj"] + parts["out_proj"]
    return linear, parts["qk"] + parts["av"]


def textbook_flops(n: int, d_model: int) -> int:
    """``8 n d^2 + 4 n^2 d``: multi-head attention with ``n_heads * d_head = d_model``."""
    return 8 * n * d_model**2 + 4 * n**2 * d_model


def crossover_length(cfg: AttentionConfig) -> float:
    """The length where the n^2 terms equal the projections: ``d_model (h + g) / h``.

    For multi-head attention this is ``2 d_model``.
    """
    return cfg.d_model * (cfg.n_heads + cfg.n_kv_heads) / cfg.n_heads


@overload
def kv_cache_bytes(
    seq_len: int, cfg: AttentionConfig, batch: int = 1, bytes_per_element: int = 2
) -> int: ...
@overload
def kv_cache_bytes(
    seq_len: np.ndarray, cfg: AttentionConfig, batch: int = 1, bytes_per_element: int = 2
) -> np.ndarray: ...
def kv_cache_bytes(
    seq_len: int | np.ndarray, cfg: AttentionConfig, batch: int = 1, bytes_per_element: int = 2
) -> Any:
    """``2 * batch * seq_len * n_layers * n_kv_heads * d_head * bytes`` (the 2 is K and V).

    An int ``seq_len`` gives an exact int; an array gives float64 (no overflow).
    """
    seq_len = seq_len if isinstance(seq_len, int) else np.asarray(seq_len, dtype=np.float64)
    return 2 * batch * seq_len * cfg.n_layers * cfg.n_kv_heads * cfg.d_head * bytes_per_element


def sequence_lengths(max_len: int = MAX_SEQ, per_octave: int = 4) -> np.ndarray:
    """Lengths from 16 to ``max_len``, evenly spaced on a log scale (integers, increasing)."""
    octaves = np.log2(max_len / 16)
    grid = 16 * 2 ** np.linspace(0, octaves, int(octaves * per_octave) + 1)
    return np.unique(np.round(grid).astype(np.int64))


def _human(value: float, units: list[str], step: float) -> str:
    value = float(value)
    for unit in units[:-1]:
        if abs(value) < step:
            return f"{value:,.0f} {unit}" if unit == units[0] else f"{value:,.2f} {unit}"
        value /= step
    return f"{value:,.2f} {units[-1]}"


def human_bytes(n_bytes: float) -> str:
    """``536870912`` -> ``"512.00 MiB"`` (binary units: KiB, MiB, GiB, TiB)."""
    return _human(n_bytes, ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], 1024.0)


def human_flops(flops: float) -> str:
    """``2.5e12`` -> ``"2.50 TFLOP"`` (decimal units: kFLOP ... PFLOP)."""
    return _human(flops, ["FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"], 1000.0)
