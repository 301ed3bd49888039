"""A run's patterns as one ``.npz`` file: what ``python -m models.capture patterns`` writes.

Arrays (NumPy's ``.npz``; read with ``numpy.load``, no pickles):

- ``token_ids``: ``pos`` int64, the ids the model read (special tokens included);
- ``kind_{l}``: a string per layer, ``softmax``, ``sliding`` or ``linear``;
- ``pattern_{l}``: ``head_index query_pos key_pos`` float32, the weight each head put on each
  key (every layer with a softmax; a learned sink's share is not among the keys);
- ``sink_{l}``: ``head_index query_pos`` float32, each row's weight on the head's learned sink,
  only where the layer has one: ``pattern_{l}.sum(-1) + sink_{l} = 1``;
- ``mixing_{l}``: ``v_head query_pos key_pos`` float32, a linear-attention layer's exact mixing
  matrix (``o_t = sum_s M[t, s] v_s``; signed, rows need not sum to 1), only for such layers;
- ``gate_{l}``: ``head_index query_pos`` float32, each head's output gate at each query (the
  mean of ``sigmoid(g)`` over its dimensions), only for gated layers.

The file is written one array at a time (a long prompt never holds every layer's patterns).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from models.capture.run import AttentionRun


def arrays(run: AttentionRun) -> Iterator[tuple[str, np.ndarray]]:
    """The file's arrays in order, one layer's at a time."""
    yield "token_ids", np.asarray(run.token_ids, dtype=np.int64)
    extras = run.extras
    for layer in range(run.facts.n_layers):
        kind = run.kind(layer)
        yield f"kind_{layer}", np.array(kind)
        if kind != "linear":
            yield f"pattern_{layer}", np.asarray(run.layer_patterns(layer), dtype=np.float32)
        if extras is None:
            continue
        if layer in extras.sinks:
            yield f"sink_{layer}", np.asarray(extras.sinks[layer], dtype=np.float32)
        if layer in extras.mixing:
            yield f"mixing_{layer}", np.asarray(extras.mixing[layer], dtype=np.float32)
        gate = extras.mean_gate(layer)
        if gate is not None:
            yield f"gate_{layer}", np.asarray(gate, dtype=np.float32)


def write_patterns(run: AttentionRun, path: Path) -> int:
    """Write :func:`arrays` to ``path`` as an ``.npz`` file; returns how many arrays."""
    count = 0
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as out:
        for name, array in arrays(run):
            with out.open(f"{name}.npy", "w", force_zip64=True) as entry:
                np.lib.format.write_array(
                    entry, np.require(array, requirements="C"), allow_pickle=False
                )
            count += 1
    return count
