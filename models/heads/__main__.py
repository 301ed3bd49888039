"""Command line: write the head finder's per-head table as CSV, or prune and export.

    python -m models.heads MODEL [--text TEXT] [--seq-len 50] [--batch 8] [--seed 0]
                                 [--ablation] [--prune-list FILE.json] --out FILE.csv
    python -m models.heads MODEL --prune K --export DIR [--corpus FILE] [--tokens N]
    python -m models.heads MODEL --prune-groups R --export DIR [--corpus FILE] [--tokens N]
    python -m models.heads atlas MODEL --out DIR [--corpus FILE] [--texts N] [--tokens N]

MODEL is ``bundled``, ``minilm``, ``smollm2``, a Hugging Face name or a local directory.
Induction is measured on repeated random tokens; the other scores on TEXT (the bundled sample
when no text is given), which is also the reference text for ``--ablation``. The table is the
head finder's own pipeline run on a one-text corpus: the same scores, flags and importance the
page shows for one text.

``--prune K`` ranks every head by its zero-ablation loss change over a corpus (FILE: ``.txt``
with passages separated by blank lines, or ``.jsonl`` with one ``{"text": ...}`` per line; by
default the model's bundled corpus, cut to ``--tokens`` tokens), prunes the K least important,
writes a Hugging Face checkpoint to DIR and prints the loss, parameter count and forward time
before and after. ``--prune-groups R`` instead removes, in every layer, the R key/value groups
whose heads matter least (Llama-style models). ``atlas`` writes the head atlas (every head's
quantities with their uncertainty, and its card) as CSV and JSON to DIR; see
:mod:`models.heads.atlas.command`. Progress goes to stderr; a failure prints one line and exits
non-zero.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from models.cli import OneLineParser, add_model, positive, speaker
from models.heads.finding.induction import DEFAULT_BATCH, DEFAULT_SEED, DEFAULT_SEQ_LEN

say = speaker("heads")


def percent(fraction: float, text: str) -> None:
    """A progress callback that says how far the work is."""
    say(f"{100 * fraction:3.0f}% {text}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, checked; a bad one exits with one line and code 2."""
    p = OneLineParser(
        prog="python -m models.heads",
        description="Score every attention head and write one CSV row per head.",
    )
    add_model(p, help="bundled, minilm, a Hugging Face name or a local directory")
    p.add_argument(
        "--text",
        help="text for the prompt-based scores and the ablation loss "
        "(default: the bundled sample text)",
    )
    p.add_argument(
        "--seq-len",
        type=positive,
        default=DEFAULT_SEQ_LEN,
        help="length L of the repeated random span",
    )
    p.add_argument(
        "--batch",
        type=positive,
        default=DEFAULT_BATCH,
        help="how many random sequences to average the induction score over",
    )
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the random tokens")
    p.add_argument("--sink-eps", type=float, default=0.3, help="sink_flag is sink > this")
    p.add_argument(
        "--ablation",
        action="store_true",
        help="add zero_ablation_dloss, mean_ablation_dloss and grad_importance",
    )
    p.add_argument(
        "--prune-list",
        type=Path,
        help="with --ablation: also write the JSON prune list (ranked by zero-ablation)",
    )
    p.add_argument(
        "--all-columns",
        action="store_true",
        help="add the page's extra columns (L.H, flags, repeated-token scores, strongest sink)",
    )
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    p.add_argument("--out", type=Path, help="CSV file to write")
    p.add_argument(
        "--prune",
        type=positive,
        metavar="K",
        help="prune the K heads with the smallest zero-ablation loss change",
    )
    p.add_argument(
        "--prune-groups",
        type=positive,
        metavar="R",
        help="remove the R least important key/value groups of every layer",
    )
    p.add_argument("--export", type=Path, metavar="DIR", help="write the pruned checkpoint here")
    p.add_argument(
        "--corpus",
        type=Path,
        metavar="FILE",
        help="corpus for the pruning ranking and report (.txt or .jsonl)",
    )
    p.add_argument(
        "--tokens",
        type=positive,
        help="tokens of the corpus to use (default: 1024 "
        "for a model of 48 heads or fewer, else 512)",
    )
    args = p.parse_args(argv)
    pruning = args.prune is not None or args.prune_groups is not None
    if args.prune is not None and args.prune_groups is not None:
        p.error("give --prune or --prune-groups, not both")
    if pruning != (args.export is not None):
        p.error("--prune K (or --prune-groups R) and --export DIR go together")
    if args.out is None and not pruning:
        p.error("the following arguments are required: --out (or --prune K --export DIR)")
    if args.out is not None and not args.out.parent.is_dir():
        p.error(f"--out: no directory {args.out.parent}")
    if args.export is not None and not args.export.parent.is_dir():
        p.error(f"--export: no directory {args.export.parent}")
    if args.prune_list is not None and not args.ablation:
        p.error("--prune-list needs --ablation")
    if args.text is not None and not args.text.strip():
        p.error("--text is empty")
    if not 0.0 <= args.sink_eps <= 1.0:
        p.error("--sink-eps must be between 0 and 1")
    return args


def run(args: argparse.Namespace) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """Load, measure and return ``(table, prune list or None)``: the corpus pipeline on a
    one-text corpus (TEXT, or the bundled sample)."""
    from models.heads.finding.corpus import Corpus, sample
    from models.heads.finding.corpus_scores import score_corpus
    from models.heads.finding.induction import measure_repeated
    from models.heads.pruning.ablation import pruning_order
    from models.heads.pruning.importance import measure_corpus_importance, pruning_curve
    from models.heads.pruning.loss import LossUnavailable, corpus_tasks
    from models.heads.table import Thresholds, cli_table, corpus_prune_list
    from models.model.loading import load
    from models.model.spec import ModelSpec

    spec = ModelSpec(name=args.model, device=args.device, dtype=args.dtype)
    model = load(spec, progress=lambda _f, text: say(text))
    facts = model.facts
    say(
        f"{facts.n_layers} layers x {facts.n_heads} heads; "
        f"{'causal' if facts.causal else 'bidirectional'}"
    )
    corpus = sample() if args.text is None else Corpus("--text", (args.text,), "--text")
    say(f"induction on {args.batch} x [start, {args.seq_len} random tokens, repeated]")
    if not facts.causal:
        say(
            "note: without a causal mask a head can read the next token directly, so the "
            "induction score means something different for this encoder"
        )
    repeated = measure_repeated(model, args.seq_len, args.batch, args.seed)
    scores = score_corpus(model, corpus.texts)
    if scores.n_cut:
        say(f"note: text cut to the first {len(scores.tokens[0])} tokens (the model's context)")
    say(f"text scores on {scores.n_tokens} tokens")
    importance, plan = None, None
    if args.ablation:
        try:
            tasks = corpus_tasks(model, corpus.texts)
            importance = measure_corpus_importance(
                model, tasks, ("zero", "mean", "gradient"), percent
            )
            if args.prune_list is not None:
                order = pruning_order(importance.zero)
                ks, losses = pruning_curve(model, tasks, order, "zero", progress=percent)
                plan = corpus_prune_list(
                    importance, "zero", "zero", order, ks, list(losses), facts.name, corpus.name
                )
        except LossUnavailable as err:
            say(f"ablation columns left empty: {err}")
    table = cli_table(
        repeated,
        scores,
        Thresholds(sink=args.sink_eps),
        importance,
        ablation=args.ablation,
        extras=args.all_columns,
    )
    return table, plan


def prune(args: argparse.Namespace) -> list[str]:
    """Rank, prune, export; return the report lines."""
    from models.heads.finding.corpus import default_corpus, read_corpus_file
    from models.heads.pruning.ablation import pruning_order
    from models.heads.pruning.export import prune_and_export
    from models.heads.pruning.importance import measure_corpus_importance
    from models.heads.pruning.loss import budget_tasks, default_budget
    from models.heads.pruning.prune import uniform_group_heads
    from models.model.loading import load
    from models.model.spec import ModelSpec

    spec = ModelSpec(name=args.model, device=args.device, dtype=args.dtype)
    model = load(spec, progress=lambda _f, text: say(text))
    corpus = read_corpus_file(args.corpus) if args.corpus else default_corpus(model)
    tasks = budget_tasks(model, corpus.texts, args.tokens or default_budget(model))
    n_tokens = sum(int(t.ids.shape[1]) for t in tasks)
    say(f"corpus: {corpus.source}; using {len(tasks)} texts, {n_tokens} tokens")
    importance = measure_corpus_importance(model, tasks, ("zero",), percent)
    if args.prune_groups is not None:
        heads = uniform_group_heads(importance.zero, model.facts.n_kv_heads, args.prune_groups)
    else:
        heads = pruning_order(importance.zero)[: args.prune]
    say(f"pruning {len(heads)} heads: {' '.join(str(h) for h in sorted(heads))}")
    report = prune_and_export(
        spec, heads, args.export.parent, tasks, percent, budget_bytes=None, name=args.export.name
    )
    return [*report.lines(), f"written to {report.directory}"]


def fail(err: BaseException) -> int:
    """Print the first line of an error and return the exit code 1."""
    print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``atlas`` first: the atlas command line); return the exit code."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["atlas"]:
        from models.heads.atlas.command import main as atlas_main

        return atlas_main(argv[1:])
    args = parse_args(argv)
    from models.errors import UserError
    from models.heads.table import prune_list_json, table_csv

    if args.export is not None:
        try:
            print("\n".join(prune(args)), flush=True)
        except (UserError, OSError) as err:
            return fail(err)
        return 0
    try:
        table, plan = run(args)
        args.out.write_text(table_csv(table), encoding="utf-8")
        if plan is not None:
            args.prune_list.write_text(prune_list_json(plan), encoding="utf-8")
    except (UserError, OSError) as err:
        return fail(err)
    say(f"wrote {len(table)} heads to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
