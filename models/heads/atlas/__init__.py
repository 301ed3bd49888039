"""The head atlas: every head of a model on one map, and a card for each.

- :mod:`models.heads.atlas.metrics` -- every per-head quantity: words, units, the uncertainty
  rule of its source, ranks, and where it does not apply;
- :mod:`models.heads.atlas.peaks` -- a head's activation on a text and the decile sampling;
- :mod:`models.heads.atlas.lowrank` -- principal components of a head's spaces, and the tokens
  that load most on each;
- :mod:`models.heads.atlas.pictures` -- each head's small picture, for the map;
- :mod:`models.heads.atlas.passes` -- the passes over the corpus that read them in the hooks;
- :mod:`models.heads.atlas.compute` -- the whole atlas in one priced, cancellable function;
- :mod:`models.heads.atlas.card` -- one head's card read off the atlas;
- :mod:`models.heads.atlas.export` -- the atlas and its cards as CSV and JSON (``schemas/``);
- :mod:`models.heads.atlas.command` -- ``python -m models.heads atlas MODEL --out DIR``.
"""
