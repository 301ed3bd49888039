"""A GGUF header reader that checks every declared size against the file before reading it.

The ``gguf`` package's reader maps the file and builds arrays for whatever the header declares:
a 114-byte file declaring a 2^40-element array makes it allocate without end. This reader walks
the same structure (magic, version, tensor and key-value counts, the key-value pairs, the tensor
descriptions) but first checks that what each count or length promises could fit in the bytes
left, so a lying header fails at once. It keeps the architecture name, the number of weights the
tensors hold, the metadata's integer values (the sizes of the model it describes: layers,
widths, vocabulary) and the length of the token list; everything else is skipped.

:func:`described_weights` reads those sizes as a lower bound on the weights such a model has,
so a file whose metadata describes a far bigger model than its tensors hold (which transformers
would build whole, making up the missing weights) can be refused before it is converted.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

MAGIC = b"GGUF"
# Value types of GGUF metadata, and the bytes one value of each takes (None: variable).
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
_INTEGERS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 10: "Q", 11: "q"}
TOKENS = b"tokenizer.ggml.tokens"
MIN_BITS_PER_WEIGHT = 1.5  # the most compact GGUF quantisation stores ~1.56 bits a weight
MAX_DIMS = 8


class HeaderError(ValueError):
    """The bytes are not a GGUF header this reader can trust."""


@dataclass(frozen=True)
class GgufHeader:
    """What the app needs from a GGUF header.

    Attributes:
        architecture: ``general.architecture`` (``llama``, ``gpt2`` ...).
        n_elements: the numbers every tensor holds together.
        n_tensors: how many tensors the file declares.
        sizes: the metadata's integer values by key (``llama.block_count`` ...).
        n_tokens: the length of the token list (``tokenizer.ggml.tokens``), 0 without one.
    """

    architecture: str
    n_elements: int
    n_tensors: int
    sizes: dict[str, int] = field(default_factory=dict)
    n_tokens: int = 0

    def size(self, name: str) -> int | None:
        """The metadata's ``<architecture>.<name>`` (``block_count``), or None."""
        return self.sizes.get(f"{self.architecture}.{name}")


def described_weights(found: GgufHeader) -> int:
    """A lower bound on the weights of the model the metadata describes: the token embedding
    (``vocab x d_model``) and, in every block, the feed-forward network's two matrices
    (``2 d_model d_ff``). Attention, norms and any further matrices only add to it."""
    d_model = found.size("embedding_length") or 0
    vocab = found.size("vocab_size") or found.n_tokens
    d_ff = found.size("feed_forward_length") or 0
    return vocab * d_model + (found.size("block_count") or 0) * 2 * d_model * d_ff


class _Reader:
    def __init__(self, fh: BinaryIO, size: int) -> None:
        self.fh, self.size = fh, size

    @property
    def left(self) -> int:
        return self.size - self.fh.tell()

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.left:
            raise HeaderError(f"the header declares {n:,} bytes where only {self.left:,} are left")
        return self.fh.read(n)

    def number(self, fmt: str) -> int:
        value: int = struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def string(self) -> bytes:
        return self.take(self.number("Q"))

    def array_length(self) -> tuple[int, int]:
        """An array's element type and count, after checking the count can fit."""
        inner, count = self.number("I"), self.number("Q")
        least = _FIXED.get(inner, 8)  # a string or array takes at least its 8-byte length
        if count * least > self.left:
            raise HeaderError(
                f"an array of {count:,} values cannot fit in the {self.left:,} bytes left"
            )
        return inner, count

    def skip_array(self, inner: int, count: int, depth: int) -> None:
        if inner in _FIXED:
            self.take(count * _FIXED[inner])
        else:
            for _ in range(count):
                self.skip_value(inner, depth + 1)

    def skip_value(self, kind: int, depth: int = 0) -> None:
        if kind in _FIXED:
            self.take(_FIXED[kind])
        elif kind == STRING:
            self.string()
        elif kind == ARRAY:
            if depth > 2:
                raise HeaderError("arrays nested too deep")
            self.skip_array(*self.array_length(), depth)
        else:
            raise HeaderError(f"unknown value type {kind}")


def read_header(path: Path) -> GgufHeader:
    """The architecture and weight count of the GGUF file at ``path``.

    Raises:
        HeaderError: not GGUF, truncated, or a count that cannot fit in the file.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        reader = _Reader(fh, size)
        if size < 4 or reader.take(4) != MAGIC:
            raise HeaderError("it does not start with the GGUF magic bytes")
        version = reader.number("I")
        if version not in (2, 3):
            raise HeaderError(f"GGUF version {version} is not one this app reads")
        n_tensors, n_kv = reader.number("Q"), reader.number("Q")
        if n_kv * 12 > reader.left or n_tensors * 24 > reader.left:
            raise HeaderError(f"{n_kv:,} keys and {n_tensors:,} tensors cannot fit in the file")
        architecture, sizes, n_tokens = None, {}, 0
        for _ in range(n_kv):
            key, kind = reader.string(), reader.number("I")
            if key == b"general.architecture" and kind == STRING:
                architecture = reader.string().decode("utf-8", "replace")
            elif kind in _INTEGERS:
                sizes[key.decode("utf-8", "replace")] = reader.number(_INTEGERS[kind])
            elif key == TOKENS and kind == ARRAY:
                inner, n_tokens = reader.array_length()
                reader.skip_array(inner, n_tokens, 1)
            else:
                reader.skip_value(kind)
        total = 0
        for _ in range(n_tensors):
            reader.string()
            n_dims = reader.number("I")
            if not 0 < n_dims <= MAX_DIMS:
                raise HeaderError(f"a tensor with {n_dims} dimensions")
            count = 1
            for _ in range(n_dims):
                count *= reader.number("Q")
            reader.number("I")  # quantisation type
            reader.number("Q")  # data offset
            total += count
            if total * MIN_BITS_PER_WEIGHT / 8 > size:
                raise HeaderError(f"{total:,} weights cannot fit in the file")
    if architecture is None:
        raise HeaderError("it names no architecture (general.architecture)")
    return GgufHeader(architecture, total, n_tensors, sizes, n_tokens)
