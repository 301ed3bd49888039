"""Circuit hunting: which heads cause an answer, not just which look like they might.

- :mod:`models.circuits.task` -- a clean/corrupted prompt pair, the answer and wrong tokens,
  their checks and the logit difference LD;
- :mod:`models.circuits.patching` -- per-head and per-position activation patching on
  ``hook_z``, many patched runs batched into one forward pass;
- :mod:`models.circuits.attribution` -- direct logit attribution of the clean run's last
  position (embeddings, heads, biases, MLPs), adding up to LD;
- :mod:`models.circuits.value_weighted` -- value-weighted attention (Kobayashi et al. 2020);
- :mod:`models.circuits.presets` -- ready-made tasks (copying random words, IOI names);
- :mod:`models.circuits.table` -- the per-head table and its CSV;
- ``python -m models.circuits patch`` -- the same table from the command line.
"""

from models.circuits.attribution import Attribution, attribute
from models.circuits.patching import (Baseline, baseline, head_effects, patched_logit_diffs,
                                      position_effects)
from models.circuits.presets import IOI, copying_task, presets
from models.circuits.table import circuit_table, table_csv, top_heads
from models.circuits.task import (CircuitsUnavailable, CircuitTask, Setup, TaskError,
                                  logit_diff, prepare)
from models.circuits.value_weighted import value_norms, value_weighted

__all__ = [
    "Attribution", "Baseline", "CircuitTask", "CircuitsUnavailable", "IOI", "Setup",
    "TaskError", "attribute", "baseline", "circuit_table", "copying_task", "head_effects",
    "logit_diff", "patched_logit_diffs", "position_effects", "prepare", "presets", "table_csv",
    "top_heads", "value_norms", "value_weighted",
]
