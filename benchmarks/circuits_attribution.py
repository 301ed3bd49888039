"""How fast and how faithful attribution patching is against exact patching; prints numbers,
never fails on time.

On SmolLM2's IOI task (``--model bundled`` uses the copying task), measured on this machine:

  1. one forward pass of the corrupted prompt (the unit every time is divided by);
  2. AtP, AtP* (QK fix), AtP* (QK fix + GradDrop) and AtP* with its top 10 heads checked by
     exact patching, each the median of ``--repeats`` runs interleaved with forward passes;
  3. exact patching of every head's z (batched, as the circuits page does);
  4. Pearson, Spearman and top-10 recall of each estimate against the exact effects, and the
     heads where they disagree most;
  5. the edge estimates of the whole graph (MLPs recomputed): where its strongest edges end,
     against the heads direct logit attribution ranks highest.

Goal (issue 25): every head with AtP* in at most 5 forward-pass times, Pearson >= 0.95 and
top-10 recall >= 0.9 against exact patching.

    python -m benchmarks.circuits_attribution [--model smollm2] [--repeats 3] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

from models.circuits import (
    IOI,
    agreement,
    attribution_patching,
    attribution_runs,
    baseline,
    copying_task,
    edge_estimates,
    graph_from_estimates,
    head_effects,
    prepare,
    top_heads,
)
from models.model.forward import run_with_hooks
from models.model.loading import load
from models.model.spec import ModelSpec

VARIANTS = {
    "AtP": {"qk_fix": False},
    "AtP* (QK fix)": {"qk_fix": True},
    "AtP* (QK fix + GradDrop)": {"qk_fix": True, "grad_drop": True},
    "AtP* (QK fix) + top 10 checked": {"qk_fix": True, "verify_top": 10},
}


def timed(work):
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def measure(model, setup, repeats: int) -> tuple[float, dict]:
    """Median forward time and, per variant, median time and its last result."""
    forward, times, results = [], {name: [] for name in VARIANTS}, {}
    run_with_hooks(model, setup.corrupted_ids)  # warm-up
    for options in VARIANTS.values():  # warm-up (first calls probe the model)
        attribution_patching(model, setup, **options)
    for _ in range(repeats):
        for name, options in VARIANTS.items():
            forward.append(timed(lambda: run_with_hooks(model, setup.corrupted_ids))[0])
            seconds, results[name] = timed(
                lambda o=options: attribution_patching(model, setup, **o)
            )
            times[name].append(seconds)
    return statistics.median(forward), {
        name: (statistics.median(times[name]), results[name]) for name in VARIANTS
    }


def graph_check(model, setup, dla: np.ndarray) -> dict:
    """Where the strongest estimated edges end, against the top heads by |DLA|."""
    seconds, estimates = timed(
        lambda: edge_estimates(model, attribution_runs(model, setup, qk_fix=True), setup)
    )
    graph = graph_from_estimates(estimates, min_weight=0.01)
    strongest = graph.strongest(10)
    top_dla = [name for name, _ in top_heads(np.abs(dla), 10)]
    ends = [str(e.receiver) for e in strongest]
    return {
        "edges_s": seconds,
        "strongest_edges": [e.label() for e in strongest],
        "top_dla_heads": top_dla,
        "edge_ends_in_top_dla": sum(end in top_dla for end in ends) / max(len(ends), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's own)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = load(ModelSpec(args.model))
    setup = prepare(model, IOI if args.model == "smollm2" else copying_task(model))
    forward_s, variants = measure(model, setup, args.repeats)
    base = baseline(model, setup)
    exact_s, exact = timed(lambda: head_effects(model, setup, base))
    rows = {}
    print(
        f"{model.facts.name}: {model.facts.n_total_heads} heads, {setup.n_tokens} tokens, "
        f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"one forward pass {forward_s:.3f} s; exact patching of every head {exact_s:.1f} s "
        f"({exact_s / forward_s:.0f} forward passes, batch {base.batch})"
    )
    for name, (seconds, result) in variants.items():
        estimate = result.best if result.verified is not None else result.z_star
        found = agreement(estimate, exact, result.saturated)
        rows[name] = {
            "seconds": seconds,
            "forward_passes": seconds / forward_s,
            "vs_exact": exact_s / seconds,
            "pearson": found.pearson,
            "spearman": found.spearman,
            "top10_recall": found.recall,
            "worst": [
                (str(w.head), round(w.estimate, 3), round(w.exact, 3), w.saturated)
                for w in found.worst
            ],
        }
        print(
            f"{name}: {seconds:.2f} s = {seconds / forward_s:.1f} forward passes "
            f"({exact_s / seconds:.0f}x faster than exact); {found.summary()}"
        )
        print(
            "  most different: "
            + ", ".join(
                f"{w.head} est {w.estimate:+.3f} exact {w.exact:+.3f}"
                + (" (saturated)" if w.saturated else "")
                for w in found.worst
            )
        )
    graph = graph_check(model, setup, base.attribution.heads)
    print(
        f"edge estimates of the whole graph: {graph['edges_s']:.1f} s; strongest: "
        f"{graph['strongest_edges'][:5]}; top heads by |DLA|: {graph['top_dla_heads'][:5]}; "
        f"share of the 10 strongest edges ending at a top-10 DLA head: "
        f"{graph['edge_ends_in_top_dla']:.1f}"
    )
    goal = rows["AtP* (QK fix)"]
    print(
        f"goal (<= 5 forward passes, Pearson >= 0.95, top-10 recall >= 0.9), AtP* (QK fix): "
        f"{goal['forward_passes']:.1f}, {goal['pearson']:.3f}, {goal['top10_recall']:.2f}"
    )
    print(
        json.dumps(
            {
                "model": args.model,
                "tokens": setup.n_tokens,
                "threads": torch.get_num_threads(),
                "load_average": os.getloadavg(),
                "forward_s": forward_s,
                "exact_s": exact_s,
                "variants": rows,
                "graph": graph,
            }
        )
    )


if __name__ == "__main__":
    main()
