"""Command line: write the head finder's per-head table as CSV.

    python -m models.heads MODEL [--text TEXT] [--seq-len 50] [--batch 8] [--seed 0]
                                 [--ablation] [--prune-list FILE.json] --out FILE.csv

MODEL is ``bundled``, ``minilm``, a Hugging Face name or a local directory. Induction is measured
on repeated random tokens; the other scores on TEXT (the bundled sample when no text is given),
which is also the reference text for ``--ablation``. Progress goes to stderr; a failure prints
one line and exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn, Sequence

import numpy as np

from models.heads.induction import DEFAULT_BATCH, DEFAULT_SEED, DEFAULT_SEQ_LEN


def say(text: str) -> None:
    print(f"[heads] {text}", file=sys.stderr, flush=True)


class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line on stderr, exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text}")
    return value


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
    p.add_argument("--out", type=Path, required=True, help="CSV file to write")
    args = p.parse_args(argv)
    if not args.out.parent.is_dir():
        p.error(f"--out: no directory {args.out.parent}")
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


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    from models.errors import PromptError
    from models.heads.induction import ScoreError
    from models.heads.table import prune_list_json, table_csv
    from models.model.loading import ModelLoadError

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
