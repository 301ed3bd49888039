"""The bundled GPT-2 (3 layers x 4 heads, trained on Python source by train.py): weights, card."""
