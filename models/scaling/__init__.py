"""The 1/sqrt(d_k) sweep: softmax saturation maths, and the model's own logits re-run at a factor.

- :mod:`models.scaling.maths` -- pure functions: scaled patterns, row statistics, the sweep and
  the synthetic Var(q . k) panel;
- :mod:`models.scaling.capture` -- every head's logits from the model, and its loss with every
  head's logits multiplied by a factor.
"""
