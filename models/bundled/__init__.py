"""The bundled GPT-2 (3 layers x 4 heads, trained on Python source by train.py): weights, card.

- :mod:`models.bundled.corpus` -- its training text (the standard library's sources) and
  tokenizer recipe, which the app reads again for the model's held-out corpus;
- ``train.py`` -- the training script (run once to make the shipped weights).
"""
