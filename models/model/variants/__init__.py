"""What each attention layer computes, one module per variant; every capability asks these.

- :mod:`models.model.variants.layers` -- each layer's kind (softmax, sliding, linear) and the
  extras in its softmax, read once from the model's own modules;
- :mod:`models.model.variants.sinks` -- learned per-head sink logits: the sink column, rows
  that sum to 1 with it, full-row entropy;
- :mod:`models.model.variants.windows` -- sliding windows (the window's edge, cached tokens)
  and logit soft-caps;
- :mod:`models.model.variants.gates` -- output gates: ``sigmoid(g)`` per head, query and
  dimension;
- :mod:`models.model.variants.linear` -- Gated DeltaNet layers: the exact mixing matrix built
  from q, k, the decay and beta;
- :mod:`models.model.variants.latent` -- multi-head latent attention: content and RoPE parts of
  each score, the cached latent;
- :mod:`models.model.variants.differential` -- differential attention, which the bridge cannot
  read: the words for its refusal;
- :mod:`models.model.variants.mixers` -- layers that are not attention (state-space mixers):
  which block holds one, and the words for the refusal at load.
"""

from models.model.variants.layers import AttentionKind, LayerVariant, all_plain, layer_variants

__all__ = ["AttentionKind", "LayerVariant", "all_plain", "layer_variants"]
