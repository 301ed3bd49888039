"""Command line: write the head finder's per-head table as CSV, or prune and export.

    python -m models.heads MODEL [--text TEXT] [--seq-len 50] [--batch 8] [--seed 0]
                                 [--ablation] [--prune-list FILE.json] --out FILE.csv
    python -m models.heads MODEL --prune K --export DIR [--corpus FILE] [--tokens N]
    python -m models.heads MODEL --prune-groups R --export DIR [--corpus FILE] [--tokens N]

MODEL is ``bundled``, ``minilm``, ``smollm2``, a Hugging Face name or a local directory.
Induction is measured on repeated random tokens; the other scores on TEXT (the bundled sample
when no text is given), which is also the reference text for ``--ablation``.

``--prune K`` ranks every head by its zero-ablation loss change over a corpus (FILE: ``.txt``
with passages separated by blank lines, or ``.jsonl`` with one ``{"text": ...}`` per line; by
default the model's bundled corpus, cut to ``--tokens`` tokens), prunes the K least important,
writes a Hugging Face checkpoint to DIR and prints the loss, parameter count and forward time
before and after. ``--prune-groups R`` instead removes, in every layer, the R key/value groups
whose heads matter least (Llama-style models). Progress goes to stderr; a failure prints one
line and exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from models.cli import OneLineParser, positive
from models.heads.induction import DEFAULT_BATCH, DEFAULT_SEED, DEFAULT_SEQ_LEN


def say(text: str) -> None:
    print(f"[heads] {text}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m models.heads",
                      description="Score every attention head and write one CSV row per head.")
    p.add_argument("model", help="bundled, minilm, a Hugging Face name or a local directory")
    p.add_argument("--text", help="text for the prompt-based scores and the ablation loss "
                                  "(default: the bundled sample text)")
    p.add_argument("--seq-len", type=positive, default=DEFAULT_SEQ_LEN,
                   help="length L of the repeated random span")
    p.add_argument("--batch", type=positive, default=DEFAULT_BATCH,
                   help="how many random sequences to average the induction score over")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the random tokens")
    p.add_argument("--sink-eps", type=float, default=0.3, help="sink_flag is sink > this")
    p.add_argument("--ablation", action="store_true",
                   help="add zero_ablation_dloss, mean_ablation_dloss and grad_importance")
    p.add_argument("--prune-list", type=Path, help="with --ablation: also write the JSON prune "
                                                   "list (ranked by zero-ablation)")
    p.add_argument("--all-columns", action="store_true",
                   help="add the page's extra columns (L.H, flags, repeated-token scores, "
                        "strongest sink)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    p.add_argument("--out", type=Path, help="CSV file to write")
    p.add_argument("--prune", type=positive, metavar="K",
                   help="prune the K heads with the smallest zero-ablation loss change")
    p.add_argument("--prune-groups", type=positive, metavar="R",
                   help="remove the R least important key/value groups of every layer")
    p.add_argument("--export", type=Path, metavar="DIR", help="write the pruned checkpoint here")
    p.add_argument("--corpus", type=Path, metavar="FILE",
                   help="corpus for the pruning ranking and report (.txt or .jsonl)")
    p.add_argument("--tokens", type=positive, help="tokens of the corpus to use (default: 1024 "
                                                   "for a model of 48 heads or fewer, else 512)")
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


def run(args: argparse.Namespace):
    """Load, measure and return ``(table, prune plan or None)``."""
    from models.capture.run import capture
    from models.heads import ablation
    from models.heads.induction import measure_repeated
    from models.heads.loss import LossUnavailable, reference_task
    from models.heads.sample import SAMPLE_TEXT
    from models.heads.scores import run_scores
    from models.heads.table import Thresholds, head_table, prune_list
    from models.model.loading import load
    from models.model.spec import ModelSpec

    spec = ModelSpec(name=args.model, device=args.device, dtype=args.dtype)
    model = load(spec, progress=lambda _f, text: say(text))
    facts = model.facts
    say(f"{facts.n_layers} layers x {facts.n_heads} heads; "
        f"{'causal' if facts.causal else 'bidirectional'}")
    text = args.text if args.text is not None else SAMPLE_TEXT
    say(f"induction on {args.batch} x [start, {args.seq_len} random tokens, repeated]")
    if not facts.causal:
        say("note: without a causal mask a head can read the next token directly, so the "
            "induction score means something different for this encoder")
    repeated = measure_repeated(model, args.seq_len, args.batch, args.seed)
    run_ = capture(model, text)
    if run_.truncated:
        say(f"note: text cut to the first {run_.n_tokens} of {run_.n_prompt_tokens} tokens")
    say(f"prompt scores on {run_.n_tokens} tokens")
    prompt = run_scores(run_)
    importance, plan = None, None
    if args.ablation:
        try:
            task = reference_task(model, text)
            importance = ablation.measure_importance(
                model, task, lambda f, text_: say(f"{100 * f:3.0f}% {text_}"))
            if args.prune_list is not None:
                order = ablation.pruning_order(importance.zero)
                losses = ablation.cumulative_pruning(
                    model, task, order, "zero", progress=lambda f, t: say(f"{100 * f:3.0f}% {t}"))
                plan = prune_list(importance, "zero", "zero", order, losses, facts.name,
                                  "bundled sample" if args.text is None else "--text")
        except LossUnavailable as err:
            say(f"ablation columns left empty: {err}")
            nan = np.full((facts.n_layers, facts.n_heads), np.nan)
            importance = ablation.Importance(np.nan, nan, nan, nan, None, "none", 0)
    table = head_table(repeated, prompt, Thresholds(sink=args.sink_eps), importance,
                       run_.tokens, extras=args.all_columns)
    return table, plan


def prune(args: argparse.Namespace) -> list[str]:
    """Rank, prune, export; return the report lines."""
    from models.heads.corpus import default_corpus, read_corpus_file
    from models.heads.corpus_ablation import measure_corpus_importance
    from models.heads.work import budget_tasks, default_budget
    from models.heads.ablation import pruning_order
    from models.heads.export import prune_and_export
    from models.heads.prune import uniform_group_heads
    from models.model.loading import load
    from models.model.spec import ModelSpec

    spec = ModelSpec(name=args.model, device=args.device, dtype=args.dtype)
    model = load(spec, progress=lambda _f, text: say(text))
    corpus = read_corpus_file(args.corpus) if args.corpus else default_corpus(model)
    tasks = budget_tasks(model, corpus.texts, args.tokens or default_budget(model))
    n_tokens = sum(int(t.ids.shape[1]) for t in tasks)
    say(f"corpus: {corpus.source}; using {len(tasks)} texts, {n_tokens} tokens")
    importance = measure_corpus_importance(model, tasks, ("zero",),
                                           lambda f, t: say(f"{100 * f:3.0f}% {t}"))
    if args.prune_groups is not None:
        heads = uniform_group_heads(importance.zero, model.facts.n_kv_heads, args.prune_groups)
    else:
        heads = pruning_order(importance.zero)[:args.prune]
    say(f"pruning {len(heads)} heads: {' '.join(f'{l}.{h}' for l, h in sorted(heads))}")
    report = prune_and_export(spec, heads, args.export, tasks,
                              lambda f, t: say(f"{100 * f:3.0f}% {t}"))
    return report.lines()


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    from models.errors import PromptError, UserError
    from models.heads.induction import ScoreError
    from models.heads.table import prune_list_json, table_csv
    from models.model.loading import ModelLoadError

    if args.export is not None:
        try:
            print("\n".join(prune(args)), flush=True)
        except (UserError, OSError) as err:
            print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
                  file=sys.stderr)
            return 1
        return 0
    try:
        table, plan = run(args)
        args.out.write_text(table_csv(table), encoding="utf-8")
        if plan is not None:
            args.prune_list.write_text(prune_list_json(plan), encoding="utf-8")
    except (ModelLoadError, PromptError, ScoreError, OSError) as err:
        print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
              file=sys.stderr)
        return 1
    say(f"wrote {len(table)} heads to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
