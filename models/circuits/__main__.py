"""Command line: patch every head and write one CSV row per head.

    python -m models.circuits patch MODEL --clean TEXT --corrupted TEXT --answer STR
                                          --wrong STR --out FILE.csv [--batch N]

MODEL is ``bundled``, ``smollm2``, a Hugging Face name, a local directory or a .gguf file. The
CSV has ``L.H, layer, head, patch_effect, dla``; the clean and corrupted logit differences go to
stdout, progress to stderr. A failure prints one line and exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from models.cli import OneLineParser, positive


def say(text: str) -> None:
    print(f"[circuits] {text}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m models.circuits",
                      description="Activation patching and direct logit attribution per head.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    patch = sub.add_parser("patch", help="patch every head's output from the clean run into "
                                         "the corrupted run; write one CSV row per head")
    patch.add_argument("model", help="bundled, smollm2, a Hugging Face name, a local directory "
                                     "or a .gguf file")
    patch.add_argument("--clean", required=True, help="the clean prompt")
    patch.add_argument("--corrupted", required=True,
                       help="the corrupted prompt (same number of tokens as the clean one)")
    patch.add_argument("--answer", required=True, help="the token the clean prompt should end in")
    patch.add_argument("--wrong", required=True, help="the token compared against it")
    patch.add_argument("--batch", type=positive, help="patched runs per forward pass "
                                                      "(default: chosen from a memory budget)")
    patch.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    patch.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    patch.add_argument("--out", type=Path, required=True, help="CSV file to write")
    args = p.parse_args(argv)
    if not args.out.parent.is_dir():
        p.error(f"--out: no directory {args.out.parent}")
    return args


def run(args: argparse.Namespace):
    """Load, patch and return ``(baseline, table)``."""
    from models.circuits import (CircuitTask, baseline, circuit_table, head_effects, prepare,
                                 top_heads)
    from models.model.loading import load
    from models.model.spec import ModelSpec

    model = load(ModelSpec(name=args.model, device=args.device, dtype=args.dtype),
                 progress=lambda _f, text: say(text))
    setup = prepare(model, CircuitTask(args.clean, args.corrupted, args.answer, args.wrong))
    for note in setup.notes:
        say(note)
    say(f"{setup.n_tokens} tokens; answer {setup.answer_label!r} (id {setup.answer_id}), "
        f"wrong {setup.wrong_label!r} (id {setup.wrong_id})")
    base = baseline(model, setup, args.batch)
    total = model.facts.n_total_heads
    passes = -(-total // base.batch)
    say(f"{total} heads in {passes} pass{'es' if passes > 1 else ''} of up to {base.batch}; about "
        f"{base.estimate_s(total):.0f} s")
    effects = head_effects(model, setup, base,
                           progress=lambda f, text: say(f"{100 * f:3.0f}% {text}"))
    top = ", ".join(f"{name} {value:.3f}" for name, value in top_heads(effects))
    say(f"largest patch effects: {top}")
    return base, circuit_table(effects, base.attribution.heads)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    from models.circuits.table import table_csv
    from models.errors import UserError

    try:
        base, table = run(args)
        args.out.write_text(table_csv(table), encoding="utf-8")
    except (UserError, OSError) as err:
        print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
              file=sys.stderr)
        return 1
    print(f"clean LD {base.ld_clean:.6g}")
    print(f"corrupted LD {base.ld_corrupted:.6g}")
    dla = base.attribution
    print(f"DLA parts sum {dla.total:.6g} (clean LD {dla.logit_diff:.6g})")
    say(f"wrote {len(table)} heads to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
