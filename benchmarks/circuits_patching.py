"""How long patching every head takes, batched against one pass per head; prints numbers, never
fails on time.

Measures, on this machine, for the bundled model's copying task and SmolLM2's IOI task:
  1. all heads patched, batched as the page does (median of ``--repeats`` runs);
  2. all heads patched one forward pass each (once; ``--skip-unbatched`` leaves it out);
  3. the five heads with the largest patch effect and the largest direct logit attribution.

    python benchmarks/circuits_patching.py [--repeats 3] [--skip-unbatched]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from models.circuits import IOI, baseline, copying_task, head_effects, prepare, top_heads
from models.model.loading import load
from models.model.spec import ModelSpec


def timed(work) -> tuple[float, object]:
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def measure(name: str, task_of, repeats: int, unbatched: bool) -> dict:
    model = load(ModelSpec(name))
    setup = prepare(model, task_of(model))
    base = baseline(model, setup)
    times, effects = [], None
    for _ in range(repeats):
        seconds, effects = timed(lambda: head_effects(model, setup, base))
        times.append(seconds)
    row = {
        "model": name,
        "tokens": setup.n_tokens,
        "heads": model.facts.n_total_heads,
        "batch": base.batch,
        "ld_clean": base.ld_clean,
        "ld_corrupted": base.ld_corrupted,
        "batched_s": statistics.median(times),
        "batched_runs_s": times,
        "estimate_s": base.estimate_s(model.facts.n_total_heads),
        "top_patch": top_heads(effects),
        "top_dla": top_heads(base.attribution.heads),
        "dla_sum": base.attribution.total,
        "threads": torch.get_num_threads(),
    }
    if unbatched:
        row["one_pass_per_head_s"], _ = timed(lambda: head_effects(model, setup, base, batch=1))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-unbatched", action="store_true")
    args = parser.parse_args()
    rows = [
        measure("bundled", copying_task, args.repeats, not args.skip_unbatched),
        measure("smollm2", lambda _model: IOI, args.repeats, not args.skip_unbatched),
    ]
    for row in rows:
        print(
            f"{row['model']}: {row['heads']} heads, {row['tokens']} tokens, batch "
            f"{row['batch']}: {row['batched_s']:.2f} s batched (estimate "
            f"{row['estimate_s']:.2f} s)"
            + (
                f", {row['one_pass_per_head_s']:.2f} s one pass per head"
                if "one_pass_per_head_s" in row
                else ""
            )
        )
        print(
            f"  LD clean {row['ld_clean']:.4f}, corrupted {row['ld_corrupted']:.4f}; "
            f"top patch {row['top_patch']}; top DLA {row['top_dla']}"
        )
    print(json.dumps({"load_average": os.getloadavg(), "results": rows}))


if __name__ == "__main__":
    main()
