"""Generation with attention rows, the KV cache, and cache-eviction experiments.

- :mod:`models.generate.settings` -- what to generate (the settings a link carries), their
  checks, the chat template;
- :mod:`models.generate.view` -- the model's own modules with a per-thread attention handler;
- :mod:`models.generate.sampling` -- the next token (greedy or sampled), its probability, the
  entropy and the alternatives;
- :mod:`models.generate.rows` -- each step's attention rows as the softmax saw them, kept as
  q, k and LSE;
- :mod:`models.generate.generation` -- the step loop: :func:`generate` and :class:`Generation`;
- :mod:`models.generate.kv` -- KV cache bytes: the formula (model, MHA, MQA) and a real cache;
- :mod:`models.generate.policies` -- attention under a bounded cache: window, sinks + window
  (StreamingLLM), heavy hitters (H2O);
- :mod:`models.generate.eviction` -- perplexity passes under a policy, sharing the full pass;
- :mod:`models.generate.sweep` -- the eviction experiment: settings, result, sink verdict;
- :mod:`models.generate.cost` -- seconds and peak bytes before anything runs;
- :mod:`models.generate.__main__` -- ``python -m models.generate``: rows to .npz, sweep to CSV.
"""

from models.generate.generation import Generation, Step, generate
from models.generate.settings import GenerationError, GenerationSettings
from models.generate.sweep import EvictionResult, EvictionSettings, eviction_sweep

__all__ = [
    "EvictionResult",
    "EvictionSettings",
    "Generation",
    "GenerationError",
    "GenerationSettings",
    "Step",
    "eviction_sweep",
    "generate",
]
