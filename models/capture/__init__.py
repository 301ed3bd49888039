"""Captured attention: a prompt's AttentionRun, dense and factored pattern stores, pooled views.

- :mod:`models.capture.run` -- :class:`AttentionRun` and :func:`capture`;
- :mod:`models.capture.store` -- the whole pattern stack, or q, k and LSE that rebuild any window;
- :mod:`models.capture.hooked` -- the fallback long-prompt capture through the bridge's hooks,
  filling the same factored store;
- :mod:`models.capture.streaming` -- the long-prompt capture through the model's own fused
  attention, in its own dtype, with float32 statistics and a dtype-aware self-check;
- :mod:`models.capture.variant_pass` -- the capture of a model whose layers are not all plain
  softmax (sinks, windows, soft-caps, gates, linear layers, latent attention);
- :mod:`models.capture.extras` -- what such a run holds beside its patterns: sink weights,
  gates, mixing matrices, latent queries and keys;
- :mod:`models.capture.fidelity` -- how closely the patterns shown reproduce each layer's own
  output, measured on sampled rows of every path;
- :mod:`models.capture.overview` -- max-pooled pictures of whole patterns straight from q and
  k: every head's thumbnail in that pass, the shown head's overview when it is shown;
- :mod:`models.capture.precision` -- a low-precision run's measured difference from float32;
- :mod:`models.capture.views` -- token colours and pooled thumbnails read from a run;
- :mod:`models.capture.weighted` -- value norms and value-weighted views (Kobayashi et al.
  2020);
- :mod:`models.capture.sinks` -- which key a run's heads sink into, measured;
- :mod:`models.capture.alignment` -- which positions of prompt A stand for which of prompt B;
- :mod:`models.capture.compare` -- every head's Jensen–Shannon divergence between two prompts
  and the ranking table;
- :mod:`models.capture.compare_fused` -- that divergence from both runs' q, k and LSE at
  matrix-product speed, a band of queries and a chunk of keys at a time;
- :mod:`models.capture.compare_cost` -- what comparing two prompts will take, stated first;
- :mod:`models.capture.difference` -- one head's A, B and A − B windows on aligned positions;
- :mod:`models.capture.bands` -- bands of query rows of a layer, rebuilt fast and checked;
- :mod:`models.capture.words` -- word-level attention (to a word: sum; from a word: mean);
- :mod:`models.capture.word_split` -- which tokens form a word, for each tokenizer family;
- :mod:`models.capture.spans` -- attention from and to a selected span of tokens or words;
- :mod:`models.capture.rollout` -- attention rollout (Abnar & Zuidema 2020) and its refusal;
- :mod:`models.capture.patterns_file` -- a run's patterns, sinks, gates and mixing matrices as
  one ``.npz`` file;
- :mod:`models.capture.__main__` -- ``python -m models.capture compare``: one CSV row per head;
  ``python -m models.capture patterns``: the ``.npz`` file.
"""

from models.capture.run import AttentionRun, capture

__all__ = ["AttentionRun", "capture"]
