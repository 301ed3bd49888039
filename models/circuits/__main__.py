"""Command line: patch every head, estimate every head's effect, path-patch into one head, or
read the weights, and write one CSV row per head (or per pair of heads).

    python -m models.circuits patch MODEL --clean TEXT --corrupted TEXT --answer STR
                                          --wrong STR --out FILE.csv [--batch N]
    python -m models.circuits atp MODEL --clean TEXT --corrupted TEXT --answer STR --wrong STR
                                        --out FILE.csv [--exact] [--check-top K]
                                        [--no-qk-fix] [--no-grad-drop]
    python -m models.circuits paths MODEL --clean TEXT --corrupted TEXT --answer STR
                                          --wrong STR --receiver L.H --input q|k|v --out FILE.csv
    python -m models.circuits weights MODEL --out FILE.csv [--pairs FILE.csv]
    python -m models.circuits why MODEL --prompt TEXT --head L.H --query I --key J
                                        --out FILE.csv [--bands]

MODEL is ``bundled``, ``smollm2``, a Hugging Face name, a local directory or a .gguf file. The
``patch`` CSV has ``L.H, layer, head, patch_effect, dla``; ``atp`` writes
:data:`models.circuits.commands.ATP_COLUMNS` (``patch_effect`` after ``atp_star`` with
``--exact``), ``paths`` ``L.H, layer, head, path_effect``, ``weights`` the per-head weight
scores and ``--pairs`` the composition scores; ``why`` splits head ``L.H``'s logit at query
``I`` and key ``J`` (positions as the explorer shows the tokens: 0 is the first, a prepended BOS
included) into ``query_part,key_part,score`` rows (``--bands``: a ``band`` column, RoPE models),
and writes the cell's score and weight to stderr. Logit differences go to stdout, progress and the
cost stated before running to stderr. A failure prints one line and exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from models.cli import OneLineParser, add_model, positive, speaker

if TYPE_CHECKING:
    import pandas as pd

    from models.circuits.patching import Baseline

say = speaker("circuits")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(
        prog="python -m models.circuits",
        description="Activation patching and direct logit attribution per head.",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    patch = sub.add_parser(
        "patch",
        help="patch every head's output from the clean run into "
        "the corrupted run; write one CSV row per head",
    )
    add_task(patch)
    patch.add_argument(
        "--batch",
        type=positive,
        help="patched runs per forward pass (default: chosen from a memory budget)",
    )
    patch.add_argument("--out", type=Path, required=True, help="CSV file to write")
    add_commands(sub)
    add_why(sub)
    args = p.parse_args(argv)
    for out in (args.out, getattr(args, "pairs", None)):
        if out is not None and not out.parent.is_dir():
            p.error(f"--out: no directory {out.parent}")
    return args


def add_commands(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """The ``atp``, ``paths`` and ``weights`` subcommands."""
    atp = sub.add_parser(
        "atp",
        help="estimate every head's patch effect with attribution "
        "patching (AtP and AtP*); write one CSV row per head",
    )
    paths = sub.add_parser(
        "paths",
        help="path-patch every earlier head into one receiver's "
        "q, k or v; write one CSV row per sender",
    )
    for command in (atp, paths):
        add_task(command)
    atp.add_argument(
        "--exact", action="store_true", help="also patch every head exactly (patch_effect column)"
    )
    atp.add_argument(
        "--check-top",
        type=int,
        default=0,
        metavar="K",
        help="patch the K heads AtP* ranks highest exactly (checked column)",
    )
    atp.add_argument("--no-qk-fix", action="store_true", help="AtP* without the QK fix")
    atp.add_argument("--no-grad-drop", action="store_true", help="AtP* without GradDrop")
    paths.add_argument("--receiver", required=True, help="the receiving head, as L.H")
    paths.add_argument(
        "--input", required=True, choices=["q", "k", "v"], help="which input of the receiver"
    )
    weights = sub.add_parser(
        "weights",
        help="per-head weight scores (OV copying, QK position "
        "preference); --pairs: composition scores",
    )
    model_options(weights)
    weights.add_argument("--pairs", type=Path, help="CSV file for the composition scores")
    for command in (atp, paths, weights):
        command.add_argument("--out", type=Path, required=True, help="CSV file to write")


def add_why(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """The ``why`` subcommand."""
    why = sub.add_parser(
        "why",
        help="split one head's logit at a query and a key into (query part, key part) "
        "pairs; write one CSV row per pair",
    )
    model_options(why)
    why.add_argument("--prompt", required=True, help="the prompt")
    why.add_argument("--head", required=True, help="the head, as L.H")
    why.add_argument(
        "--query", type=int, required=True, help="the query position (0 = first token)"
    )
    why.add_argument("--key", type=int, required=True, help="the key position")
    why.add_argument("--bands", action="store_true", help="split each pair by RoPE band too")
    why.add_argument("--out", type=Path, required=True, help="CSV file to write")


def model_options(command: argparse.ArgumentParser) -> None:
    """The model, and the device and dtype it runs in."""
    add_model(command)
    command.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    command.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")


def add_task(command: argparse.ArgumentParser) -> None:
    """The model options and the task: two prompts, the answer and the wrong token."""
    model_options(command)
    command.add_argument("--clean", required=True, help="the clean prompt")
    command.add_argument(
        "--corrupted",
        required=True,
        help="the corrupted prompt (same number of tokens as the clean one)",
    )
    command.add_argument("--answer", required=True, help="the token the clean prompt should end in")
    command.add_argument("--wrong", required=True, help="the token compared against it")


def run(args: argparse.Namespace) -> tuple[Baseline, pd.DataFrame]:
    """Load, patch and return ``(baseline, table)``."""
    from models.circuits import (
        CircuitTask,
        baseline,
        circuit_table,
        head_effects,
        prepare,
        top_heads,
    )
    from models.model.loading import load
    from models.model.spec import ModelSpec

    model = load(
        ModelSpec(name=args.model, device=args.device, dtype=args.dtype),
        progress=lambda _f, text: say(text),
    )
    setup = prepare(model, CircuitTask(args.clean, args.corrupted, args.answer, args.wrong))
    for note in setup.notes:
        say(note)
    say(
        f"{setup.n_tokens} tokens; answer {setup.answer_label!r} (id {setup.answer_id}), "
        f"wrong {setup.wrong_label!r} (id {setup.wrong_id})"
    )
    base = baseline(model, setup, args.batch)
    total = model.facts.n_total_heads
    passes = -(-total // base.batch)
    say(
        f"{total} heads in {passes} pass{'es' if passes > 1 else ''} of up to {base.batch}; about "
        f"{base.estimate_s(total):.0f} s"
    )
    effects = head_effects(
        model, setup, base, progress=lambda f, text: say(f"{100 * f:3.0f}% {text}")
    )
    top = ", ".join(f"{name} {value:.3f}" for name, value in top_heads(effects))
    say(f"largest patch effects: {top}")
    return base, circuit_table(effects, base.attribution.heads)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    from models.circuits.table import table_csv
    from models.errors import UserError

    if args.command == "why":
        return why(args)
    if args.command != "patch":
        return other(args)
    try:
        base, table = run(args)
        args.out.write_text(table_csv(table), encoding="utf-8")
    except (UserError, OSError) as err:
        print(
            f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
            file=sys.stderr,
        )
        return 1
    print(f"clean LD {base.ld_clean:.6g}")
    print(f"corrupted LD {base.ld_corrupted:.6g}")
    dla = base.attribution
    print(f"DLA parts sum {dla.total:.6g} (clean LD {dla.logit_diff:.6g})")
    say(f"wrote {len(table)} heads to {args.out}")
    return 0


def other(args: argparse.Namespace) -> int:
    """Run ``atp``, ``paths`` or ``weights``; write the CSV files; 0, or 1 after one line."""
    from models.circuits import commands
    from models.errors import UserError

    try:
        if args.command == "atp":
            result, table = commands.run_atp(args, say)
            lds = (result.ld_clean, result.ld_corrupted)
        elif args.command == "paths":
            paths, table = commands.run_paths(args, say)
            lds = (paths.ld_clean, paths.ld_corrupted)
        else:
            _, table, pairs = commands.run_weights(args, say)
            lds = None
            if pairs is not None:
                args.pairs.write_text(commands.to_csv(pairs), encoding="utf-8")
        args.out.write_text(commands.to_csv(table), encoding="utf-8")
    except (UserError, ValueError, OSError) as err:
        print(
            f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
            file=sys.stderr,
        )
        return 1
    if lds is not None:
        print(f"clean LD {lds[0]:.6g}")
        print(f"corrupted LD {lds[1]:.6g}")
    say(f"wrote {len(table)} rows to {args.out}")
    return 0


def why(args: argparse.Namespace) -> int:
    """Run ``why``: the CSV file, the cell's score and weight on stderr; 0, or 1 after one line."""
    from models.circuits.why_command import describe, run_why, table_csv
    from models.errors import UserError

    try:
        cell, table = run_why(args, say)
        args.out.write_text(table_csv(table), encoding="utf-8")
    except (UserError, ValueError, OSError) as err:
        print(
            f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
            file=sys.stderr,
        )
        return 1
    for line in describe(cell):
        say(line)
    say(f"wrote {len(table)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
