"""How fast "why here" answers on a real model and a long prompt; prints numbers, never fails on
time.

On one model and prompt length, measured in this process:

  1. one forward pass through the bridge (the unit the keep pass is compared with);
  2. the pass that keeps one head's parts (:func:`models.circuits.why_keep.keep`), against
     its estimate (:func:`models.circuits.why_keep.keep_cost`), and the resident-memory peak
     it reached above what the process held before;
  3. after that pass: one cell's split (median and slowest of ``--cells`` cells spread over
     the prompt, the last query among them), its RoPE bands, a whole row, one pair over the
     prompt, and the top parts' effects (frozen, free, weights; one resumed pass);
  4. how exactly the pairs add up: the largest ``|sum of pairs - model's logit|`` over the
     cells, relative to each row's largest logit.

Goal: a single cell in under a second after the keep pass, at 2,048 tokens on SmolLM2.

    python -m benchmarks.why_cell [--model smollm2] [--tokens 2048] [--head 18.7] [--cells 20]

The last line is one JSON object with every number.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from models.circuits.why import split
from models.circuits.why_bands import band_split
from models.circuits.why_effects import part_effects
from models.circuits.why_keep import keep, keep_cost
from models.circuits.why_rows import pair_map, row_split
from models.head import Head
from models.model.forward import run_with_hooks, tokenize
from models.model.loading import load
from models.model.spec import ModelSpec

CORPUS = Path(__file__).resolve().parents[1] / "models/heads/finding/corpora/english.txt"


def prompt_ids(model, n_tokens: int) -> torch.Tensor:
    """``1 n_tokens`` ids of the bundled English corpus (repeated as needed), as the explorer
    tokenises it."""
    text = CORPUS.read_text(encoding="utf-8")
    while len(model.tokenizer(text)["input_ids"]) < n_tokens:
        text = f"{text}\n\n{text}"
    return tokenize(model, text, n_tokens)[0]


def timed(work):
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cells(n: int, count: int) -> list[tuple[int, int]]:
    """``count`` (query, key) cells spread over the prompt: the last query first."""
    generator = torch.Generator().manual_seed(0)
    out = [(n - 1, 0), (n - 1, n - 2)]
    while len(out) < count:
        query = int(torch.randint(1, n, (1,), generator=generator))
        out.append((query, int(torch.randint(0, query + 1, (1,), generator=generator))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--head", default="18.7")
    parser.add_argument("--cells", type=int, default=20)
    args = parser.parse_args()
    model = load(ModelSpec(args.model))
    head = Head.parse(args.head)
    ids = prompt_ids(model, args.tokens)
    n = ids.shape[1]
    run_with_hooks(model, ids[:, :16])  # warm-up
    forward_s = statistics.median(timed(lambda: run_with_hooks(model, ids))[0] for _ in range(2))
    estimate = keep_cost(model, n, head.layer)
    before = peak_rss_mb()
    keep_s, kept = timed(lambda: keep(model, ids, head))
    keep_peak = peak_rss_mb() - before
    split(kept, n - 1, 0)  # warm-up
    times, worst = [], 0.0
    for query, key in cells(n, args.cells):
        seconds, cell = timed(lambda q=query, k=key: split(kept, q, k))
        times.append(seconds)
        worst = max(worst, abs(cell.difference) / cell.row_scale)
    last = split(kept, n - 1, 0)
    out = {
        "model": model.facts.name,
        "tokens": n,
        "head": str(head),
        "parts_per_side": len(kept.query.names),
        "forward_s": forward_s,
        "keep_s": keep_s,
        "keep_over_forward": keep_s / forward_s,
        "keep_estimate_s": estimate.seconds,
        "keep_estimate_peak_mb": estimate.peak_bytes / 2**20,
        "keep_peak_rss_above_mb": keep_peak,
        "cell_median_s": statistics.median(times),
        "cell_max_s": max(times),
        "cells": len(times),
        "worst_relative_difference": worst,
        "gaps": {"stream": kept.stream_gap, "query": kept.query_gap, "key": kept.key_gap},
    }
    if kept.query.cos is not None:
        out["bands_s"] = timed(lambda: band_split(kept, n - 1, 0))[0]
    out["row_s"] = timed(lambda: row_split(kept, n - 1))[0]
    out["pair_map_s"] = timed(lambda: pair_map(kept, "embed", "embed"))[0]
    out["effects_s"] = timed(lambda: part_effects(model, kept, last, k=5))[0]
    for name, value in out.items():
        print(f"{name}: {value:.4g}" if isinstance(value, float) else f"{name}: {value}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
