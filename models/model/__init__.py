"""The model: what to load (spec), loading it, its facts and tokens, and the one forward module.

- :mod:`models.model.spec` -- :class:`ModelSpec`, what the user asked to load;
- :mod:`models.model.loading` -- checks and boots a model through TransformerBridge;
- :mod:`models.model.facts` -- shape and attention behaviour read off a loaded model;
- :mod:`models.model.tokens` -- token labels a person can read;
- :mod:`models.model.forward` -- every call into the model: hook names, tokenisation, forward
  passes under the lock, the q/k the softmax sees, scales, windows and ALiBi slopes;
- :mod:`models.model.plain` -- the same model without the bridge: fused SDPA attention that
  shows each layer's q, k, v and row log-sum-exp to a callback (fast long-prompt capture);
- :mod:`models.model.resume` -- ablated passes that resume from a stored block output;
- :mod:`models.model.weights` -- output projections, unembedding and final norm for attribution;
- :mod:`models.model.gguf` -- GGUF files converted once to cached Hugging Face checkpoints;
- :mod:`models.model.load_lock` -- the process-wide lock every weight-loading step takes.
"""
