"""The shape vocabulary of the whole package, one spelling per dimension (TransformerLens's).

Public functions annotate their tensors and arrays with these aliases (jaxtyping), so a reader
sees ``Queries`` and knows it is ``batch head_index query_pos d_head`` everywhere:

- ``batch``: sequences in a pass; ``pos`` / ``query_pos`` / ``key_pos``: token positions;
- ``layer``; ``head_index`` (query heads); ``kv_head_index`` (key/value heads, fewer under GQA);
- ``d_head``, ``d_model``, ``d_vocab``; ``rotary_dim`` (the rotated part of ``d_head``).

Annotations only: nothing is checked at run time. A one-dimension shape is written with a
leading space (``" pos"``) so that linters read it as a shape, not as a name.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
from jaxtyping import Bool, Float, Int
from torch import Tensor

TokenIds: TypeAlias = Int[Tensor, "batch pos"]
Logits: TypeAlias = Float[Tensor, "batch pos d_vocab"]
Residual: TypeAlias = Float[Tensor, "batch pos d_model"]
HeadActivations: TypeAlias = Float[Tensor, "batch pos head_index d_head"]
Queries: TypeAlias = Float[Tensor, "batch head_index query_pos d_head"]
Keys: TypeAlias = Float[Tensor, "batch kv_head_index key_pos d_head"]
Values: TypeAlias = Float[Tensor, "batch kv_head_index key_pos d_head"]
Outputs: TypeAlias = Float[Tensor, "batch head_index query_pos d_head"]
RowLse: TypeAlias = Float[Tensor, "batch head_index query_pos"]
Scores: TypeAlias = Float[Tensor, "batch head_index query_pos key_pos"]
KeyMask: TypeAlias = Bool[Tensor, "batch key_pos"]
Slopes: TypeAlias = Float[Tensor, " head_index"]
HeadPattern: TypeAlias = Float[np.ndarray, "query_pos key_pos"]
LayerPatterns: TypeAlias = Float[np.ndarray, "head_index query_pos key_pos"]
PatternStack: TypeAlias = Float[np.ndarray, "layer head_index query_pos key_pos"]
TokenWeights: TypeAlias = Float[np.ndarray, " pos"]
