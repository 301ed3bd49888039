"""Command line: compare two prompts head by head and write one CSV row per head.

    python -m models.capture compare MODEL --a TEXT --b TEXT --out FILE.csv [--words]

MODEL is ``bundled``, ``smollm2``, a Hugging Face name, a local directory or a .gguf file. The
CSV has ``layer,head,divergence`` (mean Jensen–Shannon divergence in bits over aligned queries;
see :data:`models.capture.compare.DIVERGENCE_RULE`); ``--words`` merges sub-word tokens into
words first. How the prompts were aligned and the largest divergences go to stderr. A failure
prints one line and exits non-zero.
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
    args = p.parse_args(argv)
    if not args.out.parent.is_dir():
        p.error(f"--out: no directory {args.out.parent}")
    return args


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


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    from models.capture.compare import divergence_csv
    from models.errors import UserError

    try:
        result = run(args)
        args.out.write_text(divergence_csv(result.divergence), encoding="utf-8")
    except (UserError, OSError) as err:
        print(
            f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
            file=sys.stderr,
        )
        return 1
    say(f"wrote {result.divergence.size} heads to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
