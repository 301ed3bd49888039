"""bfloat16 against float32 on the same model: time, and how well the rankings agree.

Prints measured numbers and never fails on time. For one model it runs, once loaded in float32
and once in bfloat16 (the same checkpoint, so the bfloat16 weights are the float32 ones rounded):

1. every head's zero-ablation importance over the first N tokens of the model's bundled corpus,
   batched and resumed from the clean run (the app's path), with its time;
2. every head's patch effect on the IOI task (or the model's last preset), batched, with its
   time;
3. the attention patterns of one prompt: the largest and mean difference between the two
   dtypes' captures, and what :func:`models.capture.precision.pattern_difference` measured on
   the first rows (float32 arithmetic on the bfloat16 weights);

then the Spearman rank correlation of each bfloat16 ranking with the float32 one, and the
overlap of their most / least important tenth.

    python -m benchmarks.dtype_agreement                          # SmolLM2, 512 tokens
    python -m benchmarks.dtype_agreement --model bundled --tokens 256

The last line is one JSON object with every number.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

from models.model.handle import ModelHandle
from models.model.hardware import low_precision, matmul_rates
from models.model.loading import load
from models.model.spec import DType, ModelSpec

DTYPES: tuple[DType, ...] = ("float32", "bfloat16")


def ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share their mean rank), as Spearman's correlation needs them."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    order = np.argsort(flat, kind="stable")
    out = np.empty(len(flat))
    out[order] = np.arange(len(flat), dtype=np.float64)
    for value in np.unique(flat):
        tied = flat == value
        out[tied] = out[tied].mean()
    return out


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def tenth_overlap(a: np.ndarray, b: np.ndarray, top: bool) -> float:
    """Share of the most (``top``) or least important tenth that both rankings agree on."""
    k = max(1, a.size // 10)
    pick = (lambda x: np.argsort(x.ravel())[-k:]) if top else (lambda x: np.argsort(x.ravel())[:k])
    return len(set(pick(a).tolist()) & set(pick(b).tolist())) / k


def ablation(model: ModelHandle, n_tokens: int) -> tuple[np.ndarray, float, int]:
    """Zero-ablation importance of every head (batched, resumed) and its seconds."""
    from models.heads.finding.corpus import default_corpus
    from models.heads.pruning.importance import measure_corpus_importance
    from models.heads.pruning.loss import budget_tasks

    tasks = budget_tasks(model, default_corpus(model).texts, n_tokens)
    start = time.perf_counter()
    found = measure_corpus_importance(model, tasks, ("zero",))
    used = sum(int(t.ids.shape[1]) for t in tasks)
    return found.zero, time.perf_counter() - start, used


def patching(model: ModelHandle) -> tuple[np.ndarray, float, str]:
    """Every head's patch effect on IOI (else the model's last preset) and its seconds."""
    from models.circuits.patching import baseline, head_effects
    from models.circuits.presets import presets
    from models.circuits.task import prepare

    tasks = presets(model)
    name = next((k for k in tasks if "IOI" in k or "Names" in k), list(tasks)[-1])
    setup = prepare(model, tasks[name])
    start = time.perf_counter()
    effects = head_effects(model, setup, baseline(model, setup))
    return effects, time.perf_counter() - start, name


def prompt_text(model: ModelHandle, n_tokens: int) -> str:
    from models.heads.finding.corpus import default_corpus

    text = "\n\n".join(default_corpus(model).texts)
    return model.tokenizer.decode(model.tokenizer(text)["input_ids"][:n_tokens])


def patterns(models: dict[DType, ModelHandle], n_tokens: int) -> dict:
    """Both dtypes' captures of one prompt compared cell by cell, and the cheap estimate."""
    from models.capture.precision import pattern_difference
    from models.capture.run import capture

    text = prompt_text(models["float32"], n_tokens)
    runs = {dtype: capture(model, text, dense_limit=0) for dtype, model in models.items()}
    full, half = runs["float32"], runs["bfloat16"]
    gaps = [
        np.abs(full.layer_patterns(i) - half.layer_patterns(i)) for i in range(full.facts.n_layers)
    ]
    start = time.perf_counter()
    estimate = pattern_difference(models["bfloat16"], half)
    seconds = time.perf_counter() - start
    first = min(estimate.n_rows, half.n_tokens) if estimate else 0
    return {
        "tokens": half.n_tokens,
        "path": half.path,
        "largest_all_rows": float(max(g.max() for g in gaps)),
        "mean_all_rows": float(np.mean([g.mean() for g in gaps])),
        "largest_first_rows": float(max(g[:, :first].max() for g in gaps)) if first else None,
        "estimate": None if estimate is None else estimate.__dict__,
        "estimate_s": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tokens", type=int, default=512, help="corpus tokens for ablation")
    parser.add_argument("--skip", default="", help="comma list of parts to skip: ablation,patching")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    native = low_precision("bfloat16")
    print(
        f"machine: {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), bfloat16 "
        f"{'native' if native.native else 'emulated'} ({native.how}); matmul 2048^2: "
        + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in matmul_rates().items())
    )
    models = {dtype: load(ModelSpec(args.model, dtype=dtype)) for dtype in DTYPES}
    result: dict = {
        "model": models["float32"].facts.name,
        "heads": models["float32"].facts.n_total_heads,
    }
    found: dict[str, dict[str, np.ndarray]] = {"ablation": {}, "patching": {}}
    for dtype, model in models.items():
        if "ablation" not in skip:
            values, seconds, used = ablation(model, args.tokens)
            found["ablation"][dtype] = values
            result[f"ablation_{dtype}_s"], result["ablation_tokens"] = seconds, used
            print(f"{dtype}: zero-ablation of every head over {used} tokens: {seconds:.1f} s")
        if "patching" not in skip:
            values, seconds, task = patching(model)
            found["patching"][dtype] = values
            result[f"patching_{dtype}_s"], result["patching_task"] = seconds, task
            print(f"{dtype}: patching every head on {task}: {seconds:.1f} s")
    for part, both in found.items():
        if len(both) < 2:
            continue
        a, b = both["float32"], both["bfloat16"]
        result[f"{part}_spearman"] = spearman(a, b)
        result[f"{part}_top_tenth_overlap"] = tenth_overlap(a, b, top=True)
        result[f"{part}_bottom_tenth_overlap"] = tenth_overlap(a, b, top=False)
        result[f"{part}_largest_difference"] = float(np.abs(a - b).max())
        result[f"{part}_speedup"] = result[f"{part}_float32_s"] / result[f"{part}_bfloat16_s"]
        print(
            f"{part}: bfloat16 {result[f'{part}_speedup']:.2f}x faster; Spearman "
            f"{result[f'{part}_spearman']:.3f}; top tenth agree "
            f"{result[f'{part}_top_tenth_overlap']:.0%}, bottom tenth "
            f"{result[f'{part}_bottom_tenth_overlap']:.0%}; largest difference "
            f"{result[f'{part}_largest_difference']:.4f}"
        )
    result["patterns"] = patterns(models, args.tokens)
    print(f"patterns: {result['patterns']}")
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
