"""Finding heads: what each head does, measured over many texts.

- :mod:`models.heads.finding.scores` -- pure score functions over ``query_pos key_pos`` patterns;
- :mod:`models.heads.finding.induction` -- repeated random tokens, the scores on them, their cost;
- :mod:`models.heads.finding.corpus` -- corpora: the bundled ones and uploaded ``.txt``/``.jsonl``;
- :mod:`models.heads.finding.spread` -- a score over many texts: mean, standard error, bound;
- :mod:`models.heads.finding.corpus_scores` -- every score over a corpus, and where heads fire;
- :mod:`models.heads.finding.prompt_scores` -- induction, previous-token and sink scores of one
  captured prompt, read off its store, and the marks they put on the explorer's grid.
"""
