"""Generation with attention capture against transformers' plain ``generate``, and one eviction
sweep; prints numbers, never fails on time.

Measures, on this machine:
  1. SmolLM2, greedy, ``--new`` tokens after a ``--prompt``-token prompt: ``generate`` with every
     step's attention rows kept (models.generate) against ``AutoModelForCausalLM.generate`` on
     the same weights (SDPA, same dtype) writing the same tokens; runs alternate, medians of
     ``--repeats``; the ratio is capture / plain;
  2. the eviction sweep on the bundled English passage (``--evict-tokens`` tokens, budgets
     64..512, 4 sinks, window / sinks / H2O): the full pass and each policy's passes timed
     apart, the whole sweep against its estimate, and the perplexities.

    python -m benchmarks.generation [--repeats 3] [--skip-evict]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from models.generate import GenerationSettings, generate
from models.generate.cost import generation_estimate
from models.generate.policies import POLICY_NAMES
from models.generate.sweep import (
    DEFAULT_BUDGETS,
    DEFAULT_POLICIES,
    EvictionSettings,
    bundled_passage,
    estimate,
    eviction_sweep,
    sink_verdict,
)
from models.model.forward import tokenize
from models.model.loading import load
from models.model.spec import ModelSpec


def prompt_of(model, n_tokens: int) -> str:
    """Text whose tokenization has ``n_tokens`` tokens (BOS included), from the passage."""
    ids = tokenize(model, bundled_passage(), n_tokens)[0][0].tolist()
    body = ids[1:] if model.facts.prepends_bos else ids
    return model.tokenizer.decode(body, skip_special_tokens=False)


def timed(work) -> tuple[float, float, object]:
    """Wall seconds, this process's CPU seconds, and the result of ``work()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def bench_generation(model, n_prompt: int, n_new: int, repeats: int) -> dict:
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(
        model.spec.path_or_name, dtype=model.spec.torch_dtype
    ).eval()
    text = prompt_of(model, n_prompt)
    settings = GenerationSettings(max_new_tokens=n_new)
    runs: dict[str, list[tuple[float, float]]] = {"capture": [], "plain": []}
    result, wanted = None, None
    for _ in range(repeats + 1):  # the first round warms both up and is not counted
        wall, cpu, result = timed(lambda: generate(model, text, settings))
        runs["capture"].append((wall, cpu))
        ids = torch.tensor([result.ids[: result.n_prompt]])

        def plain(ids=ids):
            with torch.no_grad():
                return hf.generate(
                    ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n_new
                )

        wall, cpu, wanted = timed(plain)
        runs["plain"].append((wall, cpu))
    assert result is not None and wanted is not None
    same = wanted[0].tolist() == list(result.ids)
    estimate_s = generation_estimate(model.facts, result.n_prompt, len(result.steps)).seconds()
    row: dict = {
        "prompt_tokens": result.n_prompt,
        "new_tokens": len(result.steps),
        "same_tokens": same,
        "estimate_s": estimate_s,
        "kept_bytes": result.nbytes,
        "cache_bytes": result.cache_bytes,
    }
    for name, values in runs.items():
        counted = values[1:]
        row[f"{name}_wall_runs_s"] = [w for w, _ in counted]
        row[f"{name}_cpu_runs_s"] = [c for _, c in counted]
        row[f"{name}_s"] = statistics.median(w for w, _ in counted)
        row[f"{name}_min_s"] = min(w for w, _ in counted)
        row[f"{name}_cpu_s"] = statistics.median(c for _, c in counted)
    row["ratio"] = row["capture_s"] / row["plain_s"]
    row["ratio_min"] = row["capture_min_s"] / row["plain_min_s"]
    row["ratio_cpu"] = row["capture_cpu_s"] / row["plain_cpu_s"]
    print(
        f"generation: {result.n_prompt} prompt + {len(result.steps)} new tokens, "
        f"{torch.get_num_threads()} threads; capture {row['capture_s']:.2f} s (min "
        f"{row['capture_min_s']:.2f}), plain generate {row['plain_s']:.2f} s (min "
        f"{row['plain_min_s']:.2f}); ratio {row['ratio']:.2f}x median, "
        f"{row['ratio_min']:.2f}x best, {row['ratio_cpu']:.2f}x CPU time (target <= 1.5x); "
        f"same tokens: {same}; estimate {estimate_s:.1f} s; rows kept in "
        f"{result.nbytes / 2**20:.1f} MiB"
    )
    return row


def bench_eviction(model, n_tokens: int) -> dict:
    """The sweep as a page runs it (:func:`eviction_sweep`), timed whole and per policy (from
    its progress reports)."""
    settings = EvictionSettings(
        budgets=DEFAULT_BUDGETS, sinks=4, policies=DEFAULT_POLICIES, max_tokens=n_tokens
    )
    text = bundled_passage()
    n = int(tokenize(model, text, n_tokens)[0].shape[1])
    guess = estimate(model, n, settings)
    marks: list[tuple[float, str]] = []
    begin = time.perf_counter()
    wall, cpu, result = timed(
        lambda: eviction_sweep(
            model, text, settings, lambda _f, t: marks.append((time.perf_counter(), t))
        )
    )
    parts: dict[str, float] = {}
    last = begin
    for name in ["full cache"] + [POLICY_NAMES[p] for p in DEFAULT_POLICIES]:
        ends = [t for t, label in marks if label.startswith(name)]
        if ends:
            parts[name], last = max(ends) - last, max(ends)
    print(
        f"eviction sweep: {n} tokens, budgets {DEFAULT_BUDGETS}, {torch.get_num_threads()} "
        f"threads: {wall:.1f} s wall, {cpu:.1f} s CPU (estimate {guess.seconds():.1f} s, peak "
        f"{guess.peak_bytes / 2**20:.0f} MiB); "
        + ", ".join(f"{k} {v:.1f} s" for k, v in parts.items())
    )
    points = {f"{p.policy}@{p.budget}": p.perplexity for p in result.points}
    print(
        f"full cache perplexity {result.full_perplexity:.3f}; "
        + ", ".join(f"{k} {v:.3f}" for k, v in points.items())
    )
    print(sink_verdict(result))
    return {
        "tokens": n,
        "sweep_s": wall,
        "sweep_cpu_s": cpu,
        "parts_s": parts,
        "estimate_s": guess.seconds(),
        "estimate_peak_bytes": guess.peak_bytes,
        "full_perplexity": result.full_perplexity,
        "perplexity": points,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--new", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--evict-tokens", type=int, default=1024)
    p.add_argument("--skip-evict", action="store_true")
    p.add_argument("--skip-generation", action="store_true")
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"machine: {os.cpu_count()} CPUs (shared with other work: timings are noisy), torch "
        f"{torch.__version__}, threads {torch.get_num_threads()}, load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    model = load(ModelSpec(args.model))
    out: dict = {"model": args.model, "threads": torch.get_num_threads()}
    if not args.skip_generation:
        out["generation"] = bench_generation(model, args.prompt, args.new, args.repeats)
    if not args.skip_evict:
        out["eviction"] = bench_eviction(model, args.evict_tokens)
    out["load_average_end"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
