"""Head finder: what each head does over a corpus, and which heads can go.

The package follows the head-finder page's two halves, with what both share beside them:

- :mod:`models.heads.finding` -- finding heads: scores over a corpus, spreads, repeated-token
  induction, top examples, corpora;
- :mod:`models.heads.pruning` -- pruning heads: the loss, ablation, importance over a corpus,
  the prune plan and the exported checkpoint;
- :mod:`models.heads.atlas` -- the head atlas: every head's quantities on one corpus, the
  head cards, their export;
- :mod:`models.heads.names` -- the vocabulary: score and ranking names, column headers and help;
- :mod:`models.heads.cost` -- what the work costs before it runs (seconds, peak bytes, units);
- :mod:`models.heads.table` -- the per-head table of both halves, its CSV and the prune list;
- :mod:`models.heads.__main__` -- ``python -m models.heads``: the table or a pruned checkpoint.
"""
