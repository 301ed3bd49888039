"""Head finder: what each head does and which heads can go.

- :mod:`models.heads.scores` -- pure score functions over ``query_pos key_pos`` patterns;
- :mod:`models.heads.induction` -- repeated random tokens and the scores measured on them;
- :mod:`models.heads.loss` -- the reference loss (next-token or masked-token) and when it exists;
- :mod:`models.heads.ablation` -- zero/mean ablation, gradient importance, cumulative pruning;
- :mod:`models.heads.table` -- the per-head tables, their CSV and the JSON prune lists;
- :mod:`models.heads.corpus` -- corpora: the bundled ones and uploaded ``.txt`` / ``.jsonl``;
- :mod:`models.heads.spread` -- a score over many texts: mean, standard error, range, bound;
- :mod:`models.heads.corpus_scores` -- every score over a corpus, and where each head fires;
- :mod:`models.heads.corpus_ablation` -- importance over a corpus, batched and resumed;
- :mod:`models.heads.work` -- token budgets, the cost of a pass, progress in units of work;
- :mod:`models.heads.prune` / :mod:`models.heads.export` -- pruned checkpoints and their report;
- ``python -m models.heads`` -- the table, or a pruned checkpoint, from the command line.
"""

from models.heads.ablation import (Importance, ablated_loss, cumulative_pruning,
                                   gradient_importance, measure_importance, pruning_order)
from models.heads.induction import RepeatedScores, ScoreError, measure_repeated
from models.heads.loss import LossUnavailable, reference_task
from models.heads.sample import SAMPLE_TEXT
from models.heads.scores import PromptScores, prompt_scores
from models.heads.table import Thresholds, head_table, prune_list, table_csv

__all__ = [
    "Importance", "LossUnavailable", "PromptScores", "RepeatedScores", "SAMPLE_TEXT",
    "ScoreError", "Thresholds", "ablated_loss", "cumulative_pruning", "gradient_importance",
    "head_table", "measure_importance", "measure_repeated", "prompt_scores", "prune_list",
    "pruning_order", "reference_task", "table_csv",
]
