"""Pure computation behind the app, one package per capability; nothing here imports Streamlit.

- :mod:`models.model` -- what to load, loading it, and the one forward module;
- :mod:`models.capture` -- captured attention and its stores;
- :mod:`models.heads` -- head scores over a corpus, ablation, pruning and the per-head table;
- :mod:`models.circuits` -- patching, attribution patching, paths, logit attribution, weight
  circuits;
- :mod:`models.generate` -- generation with attention rows, the KV cache, eviction experiments;
- :mod:`models.scaling` -- the 1/sqrt(d_k) sweep;
- :mod:`models.attention` -- the app's own kernel and the kernel check;
- :mod:`models.classroom` -- the maths of the classroom page;
- :mod:`models.bundled` -- the bundled GPT-2: weights, model card, training script;

and what they all share:

- :mod:`models.head` -- :class:`Head`, a head as a value, written ``L.H``;
- :mod:`models.errors` -- :class:`UserError`, a failure written for the person using the app;
- :mod:`models.progress` -- how long work reports progress and is cancelled;
- :mod:`models.cost` -- :class:`Cost`, what a piece of work will take, from every estimator;
- :mod:`models.disk_budget` -- a folder kept under a byte budget, oldest files first;
- :mod:`models.shapes` -- the shape vocabulary (jaxtyping aliases) of every public function;
- :mod:`models.cli` -- what the command lines share.
"""
