"""Command line: let a model write and save every step's attention rows, or run the eviction sweep.

    python -m models.generate MODEL --prompt TEXT --max-new-tokens N [--chat]
                              [--temperature T --top-k K --top-p P --seed S] --out FILE.npz
    python -m models.generate MODEL --evict --text FILE --budgets 64,128,256 [--sinks 4]
                              [--policies window,sinks,h2o] [--max-tokens N] --out FILE.csv

MODEL is ``bundled``, ``smollm2``, a Hugging Face name, a local directory or a .gguf file.
Decoding is greedy unless one of --temperature, --top-k, --top-p or --seed is given (then it
samples; an unset temperature is 1). The .npz holds ``ids`` (prompt + output token ids),
``n_prompt``, ``rows`` (float32, steps x layers x heads x total length, each step's row zero
beyond its ``n_prompt + step`` keys), ``probs``, ``entropy`` (nats), ``sink``, ``prompt_share``
(steps x layers x heads) and ``cache_bytes``. The CSV has ``policy,budget,perplexity`` rows,
the full cache first (its budget is the text length). Progress goes to stderr; a failure prints
one line and exits non-zero.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from models.cli import OneLineParser, add_model, positive, speaker

if TYPE_CHECKING:
    from models.generate.settings import GenerationSettings
    from models.model.handle import ModelHandle

say = speaker("generate")


def budgets(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated positive whole numbers."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"expected numbers such as 64,128,256, got {text}"
        ) from err
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive numbers such as 64,128, got {text}")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(
        prog="python -m models.generate",
        description="Generation with attention rows, or the KV-cache eviction sweep.",
    )
    add_model(p)
    p.add_argument("--prompt", help="text to continue (generation)")
    p.add_argument("--max-new-tokens", type=positive, help="tokens to write at most")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the chat template")
    p.add_argument("--temperature", type=float, help="sampling temperature (> 0)")
    p.add_argument("--top-k", type=int, help="sample among the k most likely tokens")
    p.add_argument("--top-p", type=float, help="nucleus sampling mass in (0, 1]")
    p.add_argument("--seed", type=int, help="sampling seed")
    p.add_argument("--evict", action="store_true", help="run the eviction sweep instead")
    p.add_argument("--text", type=Path, help="text file to read (eviction)")
    p.add_argument("--budgets", type=budgets, help="cache budgets, e.g. 64,128,256")
    p.add_argument("--sinks", type=int, default=4, help="sink tokens kept (default 4)")
    p.add_argument(
        "--policies",
        default="window,sinks,h2o",
        help="bounded policies to run (default window,sinks,h2o)",
    )
    p.add_argument(
        "--max-tokens",
        type=positive,
        default=1024,
        help="cut the text to this many tokens (default 1024)",
    )
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    p.add_argument("--out", type=Path, required=True, help=".npz (generation) or .csv (eviction)")
    args = p.parse_args(argv)
    if args.evict:
        if args.text is None or args.budgets is None:
            p.error("--evict needs --text FILE and --budgets")
    elif args.prompt is None or args.max_new_tokens is None:
        p.error("generation needs --prompt and --max-new-tokens (or --evict)")
    if not args.out.parent.is_dir():
        p.error(f"--out: no directory {args.out.parent}")
    return args


def settings_from(args: argparse.Namespace) -> GenerationSettings:
    from models.generate.settings import GenerationSettings

    sample = any(v is not None for v in (args.temperature, args.top_k, args.top_p, args.seed))
    return GenerationSettings(
        max_new_tokens=args.max_new_tokens,
        chat=args.chat,
        decoding="sample" if sample else "greedy",
        temperature=1.0 if args.temperature is None else args.temperature,
        top_k=args.top_k,
        top_p=1.0 if args.top_p is None else args.top_p,
        seed=args.seed,
    )


def run_generation(model: ModelHandle, args: argparse.Namespace) -> None:
    import numpy as np

    from models.generate.generation import generate

    result = generate(
        model,
        args.prompt,
        settings_from(args),
        progress=lambda f, text: say(f"{100 * f:3.0f}% {text}"),
    )
    np.savez_compressed(
        args.out,
        ids=np.asarray(result.ids, dtype=np.int64),
        n_prompt=np.int64(result.n_prompt),
        rows=result.store.dense(),
        probs=np.asarray([s.choice.prob for s in result.steps], dtype=np.float32),
        entropy=np.asarray([s.choice.entropy for s in result.steps], dtype=np.float32),
        sink=result.sink,
        prompt_share=result.prompt_share,
        cache_bytes=np.int64(result.cache_bytes),
    )
    if result.templated is not None:
        say(f"templated prompt: {result.templated!r}")
    say(f"{len(result.steps)} tokens ({result.stop}); seed {result.settings.seed}")
    print(result.output_text)


def eviction_csv(rows: list[tuple[str, int, float]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["policy", "budget", "perplexity"])
    for policy, budget, ppl in rows:
        writer.writerow([policy, budget, f"{ppl:.6g}"])
    return buf.getvalue()


def run_eviction(model: ModelHandle, args: argparse.Namespace) -> None:
    from models.generate.sweep import EvictionSettings, estimate, eviction_sweep, sink_verdict
    from models.model.forward import tokenize

    text = args.text.read_text(encoding="utf-8")
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    settings = EvictionSettings(
        budgets=args.budgets, sinks=args.sinks, policies=policies, max_tokens=args.max_tokens
    )
    n = int(tokenize(model, text, args.max_tokens)[0].shape[1]) if text.strip() else 0
    cost = estimate(model, n, settings)
    say(f"{n} tokens; about {cost.seconds():.0f} s, {cost.peak_bytes / 2**20:.0f} MiB")
    result = eviction_sweep(
        model, text, settings, progress=lambda f, t: say(f"{100 * f:3.0f}% {t}")
    )
    args.out.write_text(eviction_csv(result.rows()), encoding="utf-8")
    say(f"sinks: {result.positions}")
    print(sink_verdict(result))


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    from models.errors import UserError
    from models.model.loading import load
    from models.model.spec import ModelSpec

    try:
        model = load(
            ModelSpec(name=args.model, device=args.device, dtype=args.dtype),
            progress=lambda _f, text: say(text),
        )
        (run_eviction if args.evict else run_generation)(model, args)
    except (UserError, OSError) as err:
        print(
            f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
            file=sys.stderr,
        )
        return 1
    say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
