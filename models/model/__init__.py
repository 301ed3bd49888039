"""The model: what to load (spec), loading it, its facts and tokens, and the one forward module.

- :mod:`models.model.spec` -- :class:`ModelSpec`, what the user asked to load;
- :mod:`models.model.handle` -- :class:`ModelHandle`, what the core may read of a loaded
  model (no bridge on it);
- :mod:`models.model.loading` -- checks and boots a model through TransformerBridge, and
  holds the one way to the bridge (:func:`~models.model.loading.bridge_of`);
- :mod:`models.model.facts` -- shape and attention behaviour read off a loaded model;
- :mod:`models.model.tokens` -- token labels a person can read;
- :mod:`models.model.softmax_terms` -- what the softmax adds from the configuration: each
  layer's scale, sliding windows, ALiBi slopes, the RoPE rotation;
- :mod:`models.model.variants` -- what each attention layer computes (sinks, windows and
  soft-caps, gates, linear layers, latent attention), one module per variant;
- :mod:`models.model.parity` -- the once-per-model comparison of the bridge's logits with
  transformers';
- :mod:`models.model.weights` -- what the core reads of the parameters: per-head q/k/v/o
  projections (GQA groups), norms, embeddings, unembedding, the wrapped transformers model;
- :mod:`models.model.norms` -- the norms on the way into an attention score (LayerNorm or
  RMSNorm, checked on a probe), the embedding norm, QK-norm and the logit soft-cap;
- :mod:`models.model.hardware` -- what the processor does natively (bfloat16) and how fast;
- :mod:`models.model.allocator` -- freed blocks kept for the next pass (glibc thresholds);

Four ways to run a model, each documented in its module:

- :mod:`models.model.forward` -- through the bridge with hooks: the only module that spells
  hook names; tokenisation and forward passes under the model's lock;
- :mod:`models.model.resume` -- passes resumed from a stored block output (ablation in batches);
- :mod:`models.model.stream` -- the stream entering one layer kept as its parts' activations
  (one pass), and that layer's queries and keys from other inputs (a resumed pass);
- :mod:`models.model.plain` -- the same weights as plain Hugging Face modules with fused SDPA,
  showing each layer's q, k, v and row log-sum-exp to a callback (long prompts);
- :mod:`models.model.eager` -- the same weights through transformers' own eager attention: the
  reference each capture's fidelity and the bridge's logits are checked against;

Files and locks:

- :mod:`models.model.gguf` -- GGUF files converted once to cached Hugging Face checkpoints;
- :mod:`models.model.gguf_header` -- a GGUF header read with every size checked first;
- :mod:`models.model.load_lock` -- the process-wide lock every weight-loading step takes.
"""
