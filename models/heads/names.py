"""The head finder's vocabulary in one place: score and ranking names, CSV column names, and the
words a newcomer reads for each (a header and a one-line explanation).

Every option vocabulary is a ``Literal`` with its tuple from ``get_args``. Every column is
declared once, in :data:`_COLUMNS`; the headers (:data:`COLUMN_LABELS`) and tooltips
(:data:`COLUMN_HELP`) are derived from it together with the spread columns, so no name can be
described twice. CSV files and the command line keep the snake_case names (stable for scripts).
"""

from __future__ import annotations

from typing import Literal, get_args

ScoreName = Literal["induction", "previous_token", "duplicate_token", "current_token", "sink"]
SCORE_NAMES: tuple[ScoreName, ...] = get_args(ScoreName)

TextScore = Literal[
    "induction_text",
    "previous_token",
    "duplicate_token",
    "current_token",
    "sink",
    "top_sink_alpha",
    "entropy",
    "distance",
    "learned_sink",
    "window_edge",
]
TEXT_SCORES: tuple[TextScore, ...] = get_args(TextScore)

ExampleScore = Literal[
    "induction_text", "previous_token", "duplicate_token", "current_token", "sink"
]
EXAMPLE_SCORES: tuple[ExampleScore, ...] = get_args(ExampleScore)

AblationMethod = Literal["zero", "mean"]
ABLATION_METHODS: tuple[AblationMethod, ...] = get_args(AblationMethod)

Ranking = Literal["zero", "mean", "gradient", "first_order"]
RANKINGS: tuple[Ranking, ...] = get_args(Ranking)

ABLATION_COLUMN: dict[Ranking, str] = {
    "zero": "zero_ablation_dloss",
    "mean": "mean_ablation_dloss",
    "gradient": "grad_importance",
    "first_order": "first_order_dloss",
}

# The command line's columns: always CORE, ABLATION with --ablation, EXTRA with --all-columns.
CORE_COLUMNS: list[str] = ["layer", "head", *SCORE_NAMES, "sink_flag", "entropy", "distance"]
ABLATION_COLUMNS: list[str] = [ABLATION_COLUMN[r] for r in ("zero", "mean", "gradient")]
EXTRA_COLUMNS: list[str] = [
    "L.H",
    "flags",
    "previous_token_repeated",
    "duplicate_token_repeated",
    "current_token_repeated",
    "top_sink_pos",
    "top_sink_token",
    "top_sink_alpha",
]

# column -> (header, tooltip); the one place a column is described.
_COLUMNS: dict[str, tuple[str, str]] = {
    "L.H": ("Head", "layer.head, counted from 0"),
    "layer": ("Layer", "Layer, counted from 0"),
    "head": ("Head index", "Head within its layer, counted from 0"),
    "flags": (
        "Flagged as",
        "Scores whose lower bound (mean - 2 SE over texts) is above its threshold (Settings)",
    ),
    "induction": (
        "Induction",
        "On [start, r, r] random tokens: mean weight a second-half query puts on the token "
        "right after its earlier copy. High = copies what followed last time.",
    ),
    "induction_text": (
        "Induction (on the corpus)",
        "Mean weight a query puts on the token right after the previous copy of its own "
        "token, over the corpus texts (queries with no earlier copy left out). The "
        "natural-text view of the induction score.",
    ),
    "previous_token": (
        "Previous token",
        "Mean weight each token puts on the token just before it.",
    ),
    "duplicate_token": (
        "Duplicate token",
        "Mean weight a repeated token puts on its earlier copies.",
    ),
    "current_token": (
        "Current token",
        "Mean weight a token puts on itself (row 0 left out: it can only see itself).",
    ),
    "sink": (
        "Sink (first token)",
        "Alpha: mean weight the other queries put on the first token (Gu et al. 2024). Above "
        "the threshold the head is a sink head.",
    ),
    "sink_flag": ("Sink head?", "The sink alpha's lower bound is above its threshold"),
    "entropy": (
        "Entropy",
        "Mean entropy of a query's attention row, in nats (row 0 left out): 0 = all on one "
        "key, ln m = spread evenly over m keys. A head with a learned sink: over the full row, "
        "the sink included.",
    ),
    "distance": (
        "Distance back",
        "Mean attention-weighted distance from a query back to its keys, in tokens (row 0 "
        "left out): 1 = previous token, 0 = itself. In an encoder, keys after the query count "
        "negative. A learned sink is at no position: only the keys count.",
    ),
    "learned_sink": (
        "Learned sink: weight",
        "Mean weight a query puts on the head's learned sink, which is no token (gpt-oss): what "
        "its row over the keys lacks of 1. None (greyed) for heads without one.",
    ),
    "sink_logit": (
        "Learned sink: logit",
        "The head's learned sink logit s, which joins every row's softmax: the larger, the "
        "more weight the sink takes from the keys.",
    ),
    "window_edge": (
        "Window edge: weight",
        "Sliding-window layers: mean weight a query puts on the oldest key its window still "
        "sees (queries the window cuts). High = attention the window cut short. None "
        "(greyed) on global layers, which have no window.",
    ),
    "previous_token_repeated": (
        "Previous token (random tokens)",
        "Previous-token score measured on the repeated random tokens",
    ),
    "duplicate_token_repeated": (
        "Duplicate token (random tokens)",
        "Duplicate-token score measured on the repeated random tokens",
    ),
    "current_token_repeated": (
        "Current token (random tokens)",
        "Current-token score measured on the repeated random tokens",
    ),
    "top_sink_pos": (
        "Strongest sink: position",
        "The key position with the largest alpha for this head (one text)",
    ),
    "top_sink_token": ("Strongest sink: token", "The token at that position"),
    "top_sink_alpha": (
        "Strongest sink: alpha",
        "Per text, the largest alpha over all key positions; averaged over texts",
    ),
    "zero_ablation_dloss": (
        "Loss change, zeroed",
        "Loss with this head's output set to zero, minus the clean loss (nats per token). "
        "Near 0 = the model does not need it here.",
    ),
    "mean_ablation_dloss": (
        "Loss change, mean-ablated",
        "Loss with this head's output replaced by its mean over the corpus, minus the clean "
        "loss (nats per token).",
    ),
    "grad_importance": (
        "Gradient importance",
        "|dL/dξ| for a mask ξ on the head's output (Michel et al. 2019): how fast the loss "
        "would change if the head were faded out.",
    ),
    "first_order_dloss": (
        "Loss change, zeroed (first-order estimate)",
        "-dL/dξ: the loss change zeroing the head would cause, to first order (one backward "
        "pass per text instead of one forward pass per head). Fast, but only an estimate: "
        "check it against the measured column.",
    ),
    "n_texts": ("Texts scored", "How many texts had something to score for this head"),
}

# suffix -> (header part, tooltip part) of the columns that describe a spread over texts.
SPREAD_PARTS: dict[str, tuple[str, str]] = {
    "_se": ("± SE", "standard error of the mean over texts (± 2 SE is about a 95 % interval)"),
    "_min": ("min", "smallest value on any one text"),
    "_max": ("max", "largest value on any one text"),
    "_lower": (
        "lower bound",
        "mean - 2 SE: the value flags are judged on (the mean itself when only one text was "
        "scored)",
    ),
    "_spread": ("spread", "± standard error · smallest to largest value over texts"),
}
SPREAD_BASES: tuple[str, ...] = ("induction", *TEXT_SCORES, *ABLATION_COLUMN.values())

COLUMN_LABELS: dict[str, str] = {
    **{name: label for name, (label, _help) in _COLUMNS.items()},
    **{
        base + suffix: f"{_COLUMNS[base][0]}: {part}"
        for base in SPREAD_BASES
        for suffix, (part, _help) in SPREAD_PARTS.items()
    },
}
COLUMN_HELP: dict[str, str] = {
    **{name: help_ for name, (_label, help_) in _COLUMNS.items()},
    **{
        base + suffix: f"{_COLUMNS[base][0]}, {help_}"
        for base in SPREAD_BASES
        for suffix, (_part, help_) in SPREAD_PARTS.items()
    },
}
SCORE_LABELS: dict[ScoreName, str] = {name: COLUMN_LABELS[name] for name in SCORE_NAMES}
