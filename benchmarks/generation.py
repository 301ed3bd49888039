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
from models.generate.eviction import full_pass, perplexity, policy_pass
from models.generate.sweep import (
    DEFAULT_BUDGETS,
    DEFAULT_POLICIES,
    EvictionSettings,
    bundled_passage,
    estimate,
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


def bench_generation(model, n_prompt: int, n_new: int, repeats: int) -> dict:
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(
        model.spec.path_or_name, dtype=model.spec.torch_dtype
    ).eval()
    text = prompt_of(model, n_prompt)
    settings = GenerationSettings(max_new_tokens=n_new)
    ours, plain, result, wanted = [], [], None, None
    for _ in range(repeats + 1):  # the first round warms both up and is not counted
        start = time.perf_counter()
        result = generate(model, text, settings)
        ours.append(time.perf_counter() - start)
        ids = torch.tensor([result.ids[: result.n_prompt]])
        start = time.perf_counter()
        with torch.no_grad():
            wanted = hf.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n_new
            )
        plain.append(time.perf_counter() - start)
    assert result is not None and wanted is not None
    same = wanted[0].tolist() == list(result.ids)
    estimate_s = generation_estimate(model.facts, result.n_prompt, len(result.steps)).seconds
    row = {
        "prompt_tokens": result.n_prompt,
        "new_tokens": len(result.steps),
        "same_tokens": same,
        "capture_s": statistics.median(ours[1:]),
        "plain_s": statistics.median(plain[1:]),
        "capture_runs_s": ours[1:],
        "plain_runs_s": plain[1:],
        "estimate_s": estimate_s,
        "kept_bytes": result.nbytes,
        "cache_bytes": result.cache_bytes,
    }
    row["ratio"] = row["capture_s"] / row["plain_s"]
    print(
        f"generation: {result.n_prompt} prompt + {len(result.steps)} new tokens; capture "
        f"{row['capture_s']:.2f} s, plain generate {row['plain_s']:.2f} s, ratio "
        f"{row['ratio']:.2f}x (target <= 1.5x); same tokens: {same}; estimate "
        f"{estimate_s:.1f} s; rows kept in {result.nbytes / 2**20:.1f} MiB"
    )
    return row


def bench_eviction(model, n_tokens: int) -> dict:
    settings = EvictionSettings(
        budgets=DEFAULT_BUDGETS, sinks=4, policies=DEFAULT_POLICIES, max_tokens=n_tokens
    )
    ids = tokenize(model, bundled_passage(), n_tokens)[0]
    n = int(ids.shape[1])
    guess = estimate(model, n, settings)
    start = time.perf_counter()
    full = full_pass(model, ids, checkpoints=tuple(b for b in DEFAULT_BUDGETS if b < n))
    times = {"full": time.perf_counter() - start}
    points = {}
    for policy in DEFAULT_POLICIES:
        start = time.perf_counter()
        for budget in DEFAULT_BUDGETS:
            got = policy_pass(model, ids, policy, budget, settings.sinks, full)
            points[f"{policy}@{budget}"] = perplexity(got)
        times[policy] = time.perf_counter() - start
    total = sum(times.values())
    print(
        f"eviction sweep: {n} tokens, budgets {DEFAULT_BUDGETS}: {total:.1f} s (estimate "
        f"{guess.seconds:.1f} s, peak {guess.peak_bytes / 2**20:.0f} MiB); "
        + ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
    )
    print(
        f"full cache perplexity {perplexity(full.losses):.3f}; "
        + ", ".join(f"{k} {v:.3f}" for k, v in points.items())
    )
    from models.generate.sweep import EvictionPoint, EvictionResult

    result = EvictionResult(
        n_tokens=n,
        full_perplexity=perplexity(full.losses),
        points=tuple(
            EvictionPoint(k.split("@")[0], int(k.split("@")[1]), v)  # type: ignore[arg-type]
            for k, v in points.items()
        ),
        sinks=4,
        positions="",
        losses={},
    )
    print(sink_verdict(result))
    return {
        "tokens": n,
        "sweep_s": total,
        "parts_s": times,
        "estimate_s": guess.seconds,
        "estimate_peak_bytes": guess.peak_bytes,
        "full_perplexity": perplexity(full.losses),
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
    args = p.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs (shared with other work: timings are noisy), torch "
        f"{torch.__version__}, threads {torch.get_num_threads()}, load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    model = load(ModelSpec(args.model))
    out = {
        "model": args.model,
        "threads": torch.get_num_threads(),
        "generation": bench_generation(model, args.prompt, args.new, args.repeats),
    }
    if not args.skip_evict:
        out["eviction"] = bench_eviction(model, args.evict_tokens)
    out["load_average_end"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
