"""Command line: write a model's head atlas to a directory.

    python -m models.heads atlas MODEL --out DIR [--corpus FILE] [--texts N] [--tokens N]
                                       [--seq-len 50] [--batch 8] [--seed 0] [--ablation]

MODEL is ``bundled``, ``minilm``, ``smollm2``, a Hugging Face name or a local directory. The
corpus is FILE (``.txt``, passages separated by blank lines, or ``.jsonl``, one ``{"text": ...}``
per line) or the model's bundled corpus; ``--texts`` keeps its first N passages and ``--tokens``
cuts each to N tokens. ``--ablation`` adds zero- and mean-ablation importance over the corpus
(slow: one pass per head and text). The price is printed before the work starts; progress goes
to stderr; a failure prints one line and exits non-zero. What DIR receives is described in
:mod:`models.heads.atlas.export`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from models.cli import OneLineParser, add_model, positive, speaker
from models.heads.finding.induction import DEFAULT_BATCH, DEFAULT_SEED, DEFAULT_SEQ_LEN

say = speaker("atlas")


def percent(fraction: float, text: str) -> None:
    say(f"{100 * fraction:3.0f}% {text}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, checked; a bad one exits with one line and code 2."""
    p = OneLineParser(
        prog="python -m models.heads atlas",
        description="Measure every attention head on a corpus; write CSV and JSON to DIR.",
    )
    add_model(p, help="bundled, minilm, smollm2, a Hugging Face name or a local directory")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="directory to write")
    p.add_argument("--corpus", type=Path, metavar="FILE", help=".txt or .jsonl (default: bundled)")
    p.add_argument("--texts", type=positive, metavar="N", help="use the first N passages")
    p.add_argument("--tokens", type=positive, metavar="N", help="cut each passage to N tokens")
    p.add_argument("--seq-len", type=positive, default=DEFAULT_SEQ_LEN)
    p.add_argument("--batch", type=positive, default=DEFAULT_BATCH)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--ablation", action="store_true", help="add ablation importance (slow)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    args = p.parse_args(argv)
    if not args.out.parent.is_dir():
        p.error(f"--out: no directory {args.out.parent}")
    if args.out.exists() and not args.out.is_dir():
        p.error(f"--out: {args.out} is a file")
    return args


def run(args: argparse.Namespace) -> list[Path]:
    """Load, price, measure, write; return the files written."""
    from models.heads.atlas.compute import atlas_estimate, compute_atlas
    from models.heads.atlas.export import write_atlas
    from models.heads.finding.corpus import default_corpus, read_corpus_file
    from models.heads.pruning.importance import measure_corpus_importance
    from models.heads.pruning.loss import LossUnavailable, corpus_tasks
    from models.model.forward import tokenize
    from models.model.loading import load
    from models.model.spec import ModelSpec

    model = load(ModelSpec(args.model, device=args.device, dtype=args.dtype), lambda _f, t: say(t))
    corpus = read_corpus_file(args.corpus) if args.corpus else default_corpus(model)
    corpus = corpus.head(args.texts) if args.texts else corpus
    sizes = [int(tokenize(model, text, args.tokens)[0].shape[1]) for text in corpus.texts]
    repeated = (args.seq_len, args.batch, args.seed)
    cost = atlas_estimate(model, sizes, repeated)
    say(f"corpus: {corpus.source}; {len(sizes)} texts, {sum(sizes):,} tokens")
    say(
        f"about {cost.seconds():,.0f} s (a first guess), at most {cost.peak_bytes / 2**20:,.0f} MiB"
    )
    importance = None
    if args.ablation:
        try:
            tasks = corpus_tasks(model, corpus.texts, args.tokens)
            importance = measure_corpus_importance(model, tasks, ("zero", "mean"), percent)
        except LossUnavailable as err:
            say(f"ablation importance left out: {err}")
    atlas = compute_atlas(
        model, corpus, args.tokens, repeated=repeated, importance=importance, progress=percent
    )
    return write_atlas(atlas, args.out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    from models.errors import UserError

    args = parse_args(argv)
    try:
        written = run(args)
    except (UserError, OSError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"error: {first}", file=sys.stderr)
        return 1
    say(f"wrote {len(written)} files to {args.out}")
    return 0
