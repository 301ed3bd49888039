"""Pure computation behind the app, one package per capability; nothing here imports Streamlit.

- :mod:`models.model` -- what to load, loading it, and the one forward module;
- :mod:`models.capture` -- captured attention and its stores;
- :mod:`models.heads` -- head scores, ablation, pruning and the per-head table;
- :mod:`models.generate` -- generation with attention rows, the KV cache, eviction experiments;
- :mod:`models.scaling` -- the 1/sqrt(d_k) sweep;
- :mod:`models.attention` -- the app's own kernel and the kernel check;
- :mod:`models.classroom` -- the maths of the classroom page;
- :mod:`models.bundled` -- the bundled GPT-2: weights, model card, training script.
"""
