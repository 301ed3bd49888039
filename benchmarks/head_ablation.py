"""Zero-ablation importance of every head over a corpus; prints numbers, never fails on time.

Measures, on this machine, for one model and the first N tokens of its bundled corpus:
  1. every head's zero-ablation loss change, batched and resumed from the clean run (the app's
     path), with the time of its first steps and what they predicted for the whole run;
  2. the same for a sample of heads one full forward pass each (the old path), scaled to all heads;
  3. the first-order estimate (one forward and one backward pass per text) and how well it ranks
     the heads against the measured values (Spearman correlation);
  4. optionally, pruning the K least important heads: loss, parameters and forward-time ratio.

    python benchmarks/head_ablation.py                       # SmolLM2, 512 tokens
    python benchmarks/head_ablation.py --model bundled --tokens 1024 --prune 3
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

from models.heads.finding.corpus import default_corpus
from models.heads.pruning import importance as ca
from models.heads.pruning.ablation import ablated_loss, pruning_order
from models.heads.pruning.loss import budget_tasks
from models.model.loading import load
from models.model.spec import ModelSpec


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a.ravel())), np.argsort(np.argsort(b.ravel()))
    return float(np.corrcoef(ra, rb)[0, 1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--sample", type=int, default=18, help="heads timed one pass each")
    p.add_argument("--prune", type=int, default=0, help="also prune this many heads")
    p.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "head_ablation.json"
    )
    args = p.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs, torch {torch.__version__}, threads "
        f"{torch.get_num_threads()}"
    )
    model = load(ModelSpec(args.model))
    tasks = budget_tasks(model, default_corpus(model).texts, args.tokens)
    n_tokens = sum(int(t.ids.shape[1]) for t in tasks)
    n_heads = model.facts.n_total_heads
    print(f"{model.facts.name}: {n_heads} heads; {len(tasks)} texts, {n_tokens} tokens")

    seen: list[tuple[float, float]] = []
    start = time.perf_counter()
    imp = ca.measure_corpus_importance(
        model, tasks, ("zero",), lambda f, _t: seen.append((time.perf_counter() - start, f))
    )
    batched = time.perf_counter() - start
    early = next(((t, f) for t, f in seen if f >= 0.1), seen[-1])
    predicted = early[0] / early[1] if early[1] else float("nan")
    print(
        f"batched + resumed, all {n_heads} heads: {batched:.1f} s "
        f"(after {early[0]:.1f} s at {early[1]:.0%} done, predicted {predicted:.0f} s)"
    )

    picks = np.linspace(0, n_heads - 1, min(args.sample, n_heads)).round().astype(int)
    heads = [divmod(int(i), model.facts.n_heads) for i in picks]
    start = time.perf_counter()
    for task in tasks:
        base = ablated_loss(model, task)
        for head in heads:
            ablated_loss(model, task, [head]) - base
    single = (time.perf_counter() - start) / len(heads) * n_heads
    print(
        f"one full pass per head (from {len(heads)} heads): {single:.1f} s for all heads; "
        f"speed-up {single / batched:.2f}x"
    )

    start = time.perf_counter()
    fast = ca.measure_corpus_importance(model, tasks, ("gradient",))
    first_order = time.perf_counter() - start
    rho = spearman(fast.first_order, imp.zero)
    order_exact, order_fast = pruning_order(imp.zero), pruning_order(fast.first_order)
    k = max(1, n_heads // 10)
    overlap = len(set(order_exact[:k]) & set(order_fast[:k])) / k
    print(
        f"first-order estimate: {first_order:.1f} s; Spearman vs measured {rho:.3f}; "
        f"{overlap:.0%} of the {k} least important heads agree"
    )
    row = {
        "model": model.facts.name,
        "heads": n_heads,
        "texts": len(tasks),
        "tokens": n_tokens,
        "batched_s": round(batched, 2),
        "predicted_s_at_10pct": round(predicted, 1),
        "one_pass_per_head_s": round(single, 2),
        "first_order_s": round(first_order, 2),
        "spearman_first_order": round(rho, 3),
        "bottom_k_overlap": overlap,
    }
    if args.prune:
        from models.heads.pruning.export import prune_and_export

        with tempfile.TemporaryDirectory() as tmp:
            report = prune_and_export(
                model.spec, order_exact[: args.prune], Path(tmp), tasks, budget_bytes=None
            )
        print("\n".join(report.lines()))
        row.update(
            {
                "pruned": args.prune,
                "loss_before": report.loss_before,
                "loss_after": report.loss_after,
                "params_before": report.params_before,
                "params_after": report.params_after,
                "time_ratio": report.time_ratio,
            }
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(row, indent=1))
    print(json.dumps(row))


if __name__ == "__main__":
    main()
