"""The head finder's vocabulary in one place: score names, CSV column names, and the words a
newcomer reads for each (a header and a one-line explanation).

CSV files and the command line keep the snake_case names (stable for scripts); the page shows
:data:`COLUMN_LABELS` with :data:`COLUMN_HELP` as tooltips.
"""

from __future__ import annotations

from typing import Literal, get_args

ScoreName = Literal["induction", "previous_token", "duplicate_token", "current_token", "sink"]
SCORE_NAMES: tuple[ScoreName, ...] = get_args(ScoreName)

SCORE_LABELS: dict[ScoreName, str] = {
    "induction": "Induction",
    "previous_token": "Previous token",
    "duplicate_token": "Duplicate token",
    "current_token": "Current token",
    "sink": "Sink (first token)",
}

SCORE_HELP: dict[ScoreName, str] = {
    "induction": "On [start, r, r] random tokens: mean weight a second-half query puts on the "
                 "token right after its earlier copy. High = copies what followed last time.",
    "previous_token": "Mean weight each token puts on the token just before it.",
    "duplicate_token": "Mean weight a repeated token puts on its earlier copies.",
    "current_token": "Mean weight a token puts on itself (row 0 left out: it can only see itself).",
    "sink": "Alpha: mean weight the other queries put on the first token (Gu et al. 2024). "
            "Above the threshold the head is a sink head.",
}

AblationColumn = Literal["zero_ablation_dloss", "mean_ablation_dloss", "grad_importance"]
ABLATION_COLUMNS: list[str] = list(get_args(AblationColumn))
RANKING_COLUMN = {"zero": "zero_ablation_dloss", "mean": "mean_ablation_dloss",
                  "gradient": "grad_importance"}

SCORE_COLUMNS: list[str] = list(SCORE_NAMES)
CORE_COLUMNS: list[str] = ["layer", "head"] + SCORE_COLUMNS + ["sink_flag"]
EXTRA_COLUMNS: list[str] = ["L.H", "flags", "previous_token_repeated", "duplicate_token_repeated",
                            "current_token_repeated", "top_sink_pos", "top_sink_token",
                            "top_sink_alpha"]

COLUMN_LABELS: dict[str, str] = {
    "L.H": "Head",
    "layer": "Layer",
    "head": "Head index",
    "flags": "Flagged as",
    **SCORE_LABELS,
    "sink_flag": "Sink head?",
    "previous_token_repeated": "Previous token (random tokens)",
    "duplicate_token_repeated": "Duplicate token (random tokens)",
    "current_token_repeated": "Current token (random tokens)",
    "top_sink_pos": "Strongest sink: position",
    "top_sink_token": "Strongest sink: token",
    "top_sink_alpha": "Strongest sink: alpha",
    "zero_ablation_dloss": "Loss change, zeroed",
    "mean_ablation_dloss": "Loss change, mean-ablated",
    "grad_importance": "Gradient importance",
}

COLUMN_HELP: dict[str, str] = {
    **SCORE_HELP,
    "L.H": "layer.head, counted from 0",
    "flags": "Scores above their thresholds (Settings)",
    "sink_flag": "Sink alpha above its threshold",
    "previous_token_repeated": "Previous-token score measured on the repeated random tokens",
    "duplicate_token_repeated": "Duplicate-token score measured on the repeated random tokens",
    "current_token_repeated": "Current-token score measured on the repeated random tokens",
    "top_sink_pos": "The key position with the largest alpha for this head",
    "top_sink_token": "The token at that position",
    "top_sink_alpha": "Its alpha: mean weight the queries after it put on it",
    "zero_ablation_dloss": "Loss with this head's output set to zero, minus the clean loss "
                           "(nats per token). Near 0 = the model does not need it here.",
    "mean_ablation_dloss": "Loss with this head's output replaced by its mean over the text, "
                           "minus the clean loss (nats per token).",
    "grad_importance": "|dL/dξ| for a mask ξ on the head's output (Michel et al. 2019): how "
                       "fast the loss would change if the head were faded out.",
}

# --- corpus-level columns ---------------------------------------------------------------------

CORPUS_SCORES: list[str] = ["induction", "induction_text", "previous_token", "duplicate_token",
                            "current_token", "sink", "top_sink_alpha"]
CORPUS_ABLATION: dict[str, str] = {"zero": "zero_ablation_dloss", "mean": "mean_ablation_dloss",
                                   "gradient": "grad_importance",
                                   "first_order": "first_order_dloss"}
SPREAD_PARTS: dict[str, tuple[str, str]] = {
    "_se": ("± SE", "standard error of the mean over texts (± 2 SE is about a 95 % interval)"),
    "_min": ("min", "smallest value on any one text"),
    "_max": ("max", "largest value on any one text"),
    "_lower": ("lower bound", "mean - 2 SE: the value flags are judged on (the mean itself "
                              "when only one text was scored)"),
    "_spread": ("spread", "± standard error · smallest to largest value over texts"),
}

COLUMN_LABELS.update({
    "induction_text": "Induction (on the corpus)",
    "first_order_dloss": "Loss change, zeroed (first-order estimate)",
    "top_sink_alpha": "Strongest sink: alpha",
    "n_texts": "Texts scored",
})
COLUMN_HELP.update({
    "induction_text": "Mean weight a query puts on the token right after the previous copy of "
                      "its own token, over the corpus texts (queries with no earlier copy left "
                      "out). The natural-text view of the induction score.",
    "first_order_dloss": "-dL/dξ: the loss change zeroing the head would cause, to first order "
                         "(one backward pass per text instead of one forward pass per head). "
                         "Fast, but only an estimate: check it against the measured column.",
    "top_sink_alpha": "Per text, the largest alpha over all key positions; averaged over texts",
    "n_texts": "How many texts had something to score for this head",
    "layer": "Layer, counted from 0",
    "head": "Head within its layer, counted from 0",
    "flags": "Scores whose lower bound (mean - 2 SE over texts) is above its threshold "
             "(Settings)",
})
for _base in CORPUS_SCORES + list(CORPUS_ABLATION.values()):
    for _suffix, (_label, _help) in SPREAD_PARTS.items():
        COLUMN_LABELS[_base + _suffix] = f"{COLUMN_LABELS.get(_base, _base)}: {_label}"
        COLUMN_HELP[_base + _suffix] = f"{COLUMN_LABELS.get(_base, _base)}, {_help}"
