"""Command lines: compare two prompts head by head; write one prompt's patterns to a file.

    python -m models.capture compare MODEL --a TEXT --b TEXT --out FILE.csv [--words]
    python -m models.capture patterns MODEL --prompt TEXT --out FILE.npz

MODEL is ``bundled``, ``smollm2``, a Hugging Face name, a local directory or a .gguf file. The
CSV has ``layer,head,divergence`` (mean Jensen–Shannon divergence in bits over aligned queries;
see :data:`models.capture.compare.DIVERGENCE_RULE`); ``--words`` merges sub-word tokens into
words first. How the prompts were aligned and the largest divergences go to stderr.

``patterns`` writes every layer's patterns, and the sinks, gates and mixing matrices of models
that have them, as :mod:`models.capture.patterns_file` describes; the layers' kinds and the
measured fidelity go to stderr, and a run above the fidelity tolerance writes nothing. A
failure prints one line and exits non-zero.
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
    from models.capture.compare import Comparison


say = speaker("capture")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(
        prog="python -m models.capture",
        description="Compare the attention of two prompts, head by head.",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    compare = sub.add_parser(
        "compare",
        help="Jensen–Shannon divergence of every head's attention between prompts A and B",
    )
    add_model(compare)
    compare.add_argument("--a", required=True, help="prompt A")
    compare.add_argument("--b", required=True, help="prompt B")
    compare.add_argument(
        "--words", action="store_true", help="merge sub-word tokens into words before comparing"
    )
    compare.add_argument(
        "--max-tokens",
        type=positive,
        help="cut each prompt to this many tokens (default: the context)",
    )
    compare.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    compare.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    compare.add_argument("--out", type=Path, required=True, help="CSV file to write")
    patterns = sub.add_parser(
        "patterns", help="every layer's patterns (and sinks, gates, mixing matrices) as .npz"
    )
    add_model(patterns)
    patterns.add_argument("--prompt", required=True, help="the text to read")
    patterns.add_argument("--max-tokens", type=positive, help="cut the prompt to this many tokens")
    patterns.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    patterns.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    patterns.add_argument("--out", type=Path, required=True, help=".npz file to write")
    args = p.parse_args(argv)
    if not args.out.parent.is_dir():
        p.error(f"--out: no directory {args.out.parent}")
    return args


def one_line(err: BaseException) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def run(args: argparse.Namespace) -> Comparison:
    """Load, capture both prompts and return the :class:`Comparison`."""
    from models.capture.compare import head_divergence
    from models.capture.compare_cost import compare_cost
    from models.capture.run import capture
    from models.capture.word_split import split_words
    from models.capture.words import Words
    from models.model.loading import load
    from models.model.spec import ModelSpec

    model = load(
        ModelSpec(name=args.model, device=args.device, dtype=args.dtype),
        progress=lambda _f, text: say(text),
    )
    runs = [capture(model, text, args.max_tokens) for text in (args.a, args.b)]
    for name, one in zip("AB", runs, strict=True):
        cut = f" (cut from {one.n_prompt_tokens})" if one.truncated else ""
        say(f"prompt {name}: {one.n_tokens} tokens{cut}")
    words: list[Words | None] = [None, None]
    if args.words:
        split = [
            split_words(model.tokenizer, one.prompt, one.token_ids, one.tokens) for one in runs
        ]
        say(f"words: A {split[0].n_words}, B {split[1].n_words} ({split[0].source})")
        words = list(split)
    factored = runs[0].factored and runs[1].factored
    n_a, n_b = runs[0].n_tokens, runs[1].n_tokens
    cost = compare_cost(model.facts, n_a, n_b, factored, words=args.words)
    say(f"{model.facts.n_total_heads} heads; about {cost.seconds():.0f} s")
    result = head_divergence(
        runs[0],
        runs[1],
        words[0],
        words[1],
        progress=lambda f, text: say(f"{100 * f:3.0f}% {text}"),
    )
    say(result.alignment.describe("words" if args.words else "tokens"))
    top = result.ranking().head(5)
    say(
        "largest divergences: "
        + ", ".join(f"{h} {v:.4f}" for h, v in zip(top["head"], top["divergence"], strict=True))
    )
    return result


def write_patterns(args: argparse.Namespace) -> None:
    """Load, capture the prompt and write its patterns (see ``patterns_file``).

    Raises:
        UserError: the model, the prompt, or a run whose patterns fail the fidelity check.
    """
    from models.capture.patterns_file import write_patterns as write
    from models.capture.run import capture
    from models.errors import UserError
    from models.model.loading import load
    from models.model.parity import parity_of
    from models.model.spec import ModelSpec

    model = load(
        ModelSpec(name=args.model, device=args.device, dtype=args.dtype),
        progress=lambda _f, text: say(text),
    )
    parity = parity_of(model)
    if parity is not None and not parity.agrees:
        say(parity.text())
    run = capture(model, args.prompt, args.max_tokens)
    kinds = [run.kind(layer) for layer in range(run.facts.n_layers)]
    say(f"{run.n_tokens} tokens; layers: " + ", ".join(f"{i} {k}" for i, k in enumerate(kinds)))
    if run.fidelity is not None:
        refusal = run.fidelity.refusal()
        if refusal:
            raise UserError(refusal)
        say(run.fidelity.text())
    say(f"wrote {write(run, args.out)} arrays to {args.out}")


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    from models.capture.compare import divergence_csv
    from models.errors import UserError

    if args.command == "patterns":
        try:
            write_patterns(args)
        except (UserError, OSError) as err:
            print(f"error: {one_line(err)}", file=sys.stderr)
            return 1
        return 0
    try:
        result = run(args)
        args.out.write_text(divergence_csv(result.divergence), encoding="utf-8")
    except (UserError, OSError) as err:
        print(f"error: {one_line(err)}", file=sys.stderr)
        return 1
    say(f"wrote {result.divergence.size} heads to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
