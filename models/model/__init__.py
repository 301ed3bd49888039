"""The model: what to load (spec), loading it, its facts and tokens, and the one forward module.

- :mod:`models.model.spec` -- :class:`ModelSpec`, what the user asked to load;
- :mod:`models.model.loading` -- checks and boots a model through TransformerBridge;
- :mod:`models.model.facts` -- shape and attention behaviour read off a loaded model;
- :mod:`models.model.tokens` -- token labels a person can read;
- :mod:`models.model.forward` -- every call into the model: hook names, tokenisation, forward
  passes under the lock, the q/k the softmax sees, scales, windows and ALiBi slopes.
"""
