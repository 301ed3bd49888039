"""Circuit hunting: which heads cause an answer, not just which look like they might.

- :mod:`models.circuits.task` -- a clean/corrupted prompt pair, the answer and wrong tokens,
  their checks and the logit difference LD;
- :mod:`models.circuits.patching` -- per-head and per-position activation patching on
  ``hook_z``, many patched runs batched into one forward pass;
- :mod:`models.circuits.attribution` -- direct logit attribution of the clean run's last
  position (embeddings, heads, biases, MLPs), adding up to LD;
- :mod:`models.circuits.presets` -- ready-made tasks (copying random words, IOI names);
- :mod:`models.circuits.table` -- the per-head table and its CSV;
- :mod:`models.circuits.gradients` -- the corrupted pass with gradients of LD, and GradDrop;
- :mod:`models.circuits.atp_runs` -- the clean and corrupted passes attribution patching reads;
- :mod:`models.circuits.atp_fixes` -- AtP*'s QK fix and GradDrop as pure functions;
- :mod:`models.circuits.atp` -- attribution patching (AtP, AtP*) of every head's z, q, k, v;
- :mod:`models.circuits.input_patching` -- exact patching of each head's q, k or v;
- :mod:`models.circuits.resumed` -- patched runs that start at the first patched block;
- :mod:`models.circuits.agreement` -- an estimate against exact patching (correlations, recall);
- :mod:`models.circuits.paths` -- path patching from every earlier head into one head's input;
- :mod:`models.circuits.edges` -- attribution-patching estimates of every head-to-head edge;
- :mod:`models.circuits.graph` -- the circuit graph (heads by layer, edges above a threshold);
- :mod:`models.circuits.weight_circuits` -- OV copying and QK positional scores per head;
- :mod:`models.circuits.composition` -- Q-, K-, V-composition between heads;
- :mod:`models.circuits.findings` -- what the attribution and weights jobs keep, and their work;
- :mod:`models.circuits.cost` -- the passes and the cost of each computation;
- :mod:`models.circuits.why_parts` -- the stream entering a layer as named parts, every
  norm's scale frozen;
- :mod:`models.circuits.why_sides` -- one head's queries and keys as those parts (norm,
  projection, QK-norm, RoPE), and the rest of its softmax;
- :mod:`models.circuits.why_keep` -- the one pass that keeps both sides of a head, priced;
- :mod:`models.circuits.why` -- "why here": one score split into (query part, key part) pairs;
- :mod:`models.circuits.why_effects` -- one part removed: the score with scales frozen and
  free, the attention weights recomputed;
- :mod:`models.circuits.why_bands` -- the same score split by RoPE frequency band;
- :mod:`models.circuits.why_rows` -- a whole row by part, and one pair over the prompt;
- :mod:`models.circuits.loadings` -- head loadings: DLA and path-patching edges into a head,
  one part per earlier head plus a remainder that closes the sum;
- :mod:`models.circuits.why_command` -- the ``why`` command's table;
- :mod:`models.circuits.commands` -- the ``atp``, ``paths`` and ``weights`` commands' tables;
- :mod:`models.circuits.__main__` -- ``python -m models.circuits patch | atp | paths |
  weights | why``.
"""

from models.circuits.agreement import Agreement, agreement, top_k_recall
from models.circuits.atp import AtPResult, attribution_patching
from models.circuits.atp_runs import AtPRuns, attribution_runs
from models.circuits.attribution import Attribution, attribute
from models.circuits.composition import Composition, composition
from models.circuits.cost import PassPlan, atp_cost, edges_cost, exact_cost, path_cost, weights_cost
from models.circuits.edges import EdgeEstimates, edge_estimates
from models.circuits.graph import CircuitGraph, Edge, graph_from_estimates, graph_from_paths
from models.circuits.input_patching import input_effects
from models.circuits.loadings import Loadings, dla_loadings, path_loadings
from models.circuits.patching import (
    Baseline,
    baseline,
    head_effects,
    patched_logit_diffs,
    position_effects,
)
from models.circuits.paths import PathResult, path_patching
from models.circuits.presets import IOI, copying_task, presets
from models.circuits.table import circuit_table, table_csv, top_heads
from models.circuits.task import (
    CircuitsUnavailable,
    CircuitTask,
    Setup,
    TaskError,
    logit_diff,
    prepare,
)
from models.circuits.weight_circuits import (
    Correlation,
    WeightScores,
    weight_data_correlation,
    weight_scores,
)
from models.circuits.why import CellError, WhySplit, split
from models.circuits.why_bands import BandSplit, band_split
from models.circuits.why_effects import PartEffect, part_effects
from models.circuits.why_keep import KeptHead, WhyUnavailable, keep, keep_cost, keep_prompt
from models.circuits.why_rows import PairMap, RowSplit, pair_map, row_split

__all__ = [
    "IOI",
    "Agreement",
    "AtPResult",
    "AtPRuns",
    "Attribution",
    "BandSplit",
    "Baseline",
    "CellError",
    "CircuitGraph",
    "CircuitTask",
    "CircuitsUnavailable",
    "Composition",
    "Correlation",
    "Edge",
    "EdgeEstimates",
    "KeptHead",
    "Loadings",
    "PairMap",
    "PartEffect",
    "PassPlan",
    "PathResult",
    "RowSplit",
    "Setup",
    "TaskError",
    "WeightScores",
    "WhySplit",
    "WhyUnavailable",
    "agreement",
    "atp_cost",
    "attribute",
    "attribution_patching",
    "attribution_runs",
    "band_split",
    "baseline",
    "circuit_table",
    "composition",
    "copying_task",
    "dla_loadings",
    "edge_estimates",
    "edges_cost",
    "exact_cost",
    "graph_from_estimates",
    "graph_from_paths",
    "head_effects",
    "input_effects",
    "keep",
    "keep_cost",
    "keep_prompt",
    "logit_diff",
    "pair_map",
    "part_effects",
    "patched_logit_diffs",
    "path_cost",
    "path_loadings",
    "path_patching",
    "position_effects",
    "prepare",
    "presets",
    "row_split",
    "split",
    "table_csv",
    "top_heads",
    "top_k_recall",
    "weight_data_correlation",
    "weight_scores",
    "weights_cost",
]
