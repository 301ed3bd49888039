"""The app's own attention kernel (Triton on a GPU, an exact tiled PyTorch path elsewhere) and
the kernel check that runs it on a model's real q, k, v.

- :mod:`models.attention.api` -- :func:`attention` (output and per-row log-sum-exp) and the
  choice of backend;
- :mod:`models.attention.triton_kernel` -- the Triton forward kernel;
- :mod:`models.attention.tiled` -- the same algorithm in PyTorch tiles (the fallback);
- :mod:`models.attention.reference` -- naive attention, the materialising yardstick;
- :mod:`models.attention.pattern` -- any window of the pattern rebuilt from the LSE;
- :mod:`models.attention.options` -- :class:`AttentionOptions`, what the softmax adds to
  ``q kᵀ`` (mask, scale, ALiBi, window, soft cap, padding), as one value;
- :mod:`models.attention.masking` -- causal, sliding-window and ALiBi masks;
- :mod:`models.attention.validate` -- shape, dtype and option checks of the public wrapper;
- :mod:`models.attention.inputs` -- a model's q, k, v, z, patterns, scales and masks per layer;
- :mod:`models.attention.check` -- the kernel against the model, head by head;
- :mod:`models.attention.timing` -- the kernel, SDPA and naive attention timed on the same tensors.

Triton is imported only when the Triton backend actually runs.
"""

from models.attention.api import (
    BACKENDS,
    Backend,
    BackendName,
    attention,
    choose_backend,
    triton_available,
)
from models.attention.options import NO_OPTIONS, AttentionOptions
from models.attention.pattern import pattern_of_rows, rebuild_pattern
from models.attention.reference import naive_attention

__all__ = [
    "BACKENDS",
    "NO_OPTIONS",
    "AttentionOptions",
    "Backend",
    "BackendName",
    "attention",
    "choose_backend",
    "naive_attention",
    "pattern_of_rows",
    "rebuild_pattern",
    "triton_available",
]
