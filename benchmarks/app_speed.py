"""How fast and how lean the app is on long prompts; prints numbers, never fails on time.

Measures, on this machine:
  1. prompt change -> rendered explorer (AppTest, bundled model, prompts filling its context);
  2. capture time against a bare ``run_with_cache`` of the same model and prompt;
  3. head scores for every head of a GPT-2-small-sized model (random weights) at 512 tokens;
  4. resident memory above the loaded model while exploring a 2,048-token prompt;
  5. the size of what one explorer view sends to the browser.

    python benchmarks/app_speed.py            # full run
    python benchmarks/app_speed.py --quick    # fewer repeats
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from models.capture.run import capture
from models.model.forward import tokenize
from models.model.loading import load
from models.model.spec import BUNDLED_DIR, ModelSpec


def status_mib(field: str) -> float:
    """A memory line of /proc/self/status (``VmRSS`` now, ``VmHWM`` peak) in MiB."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_mib() -> float:
    return status_mib("VmRSS")


def peak_rss_mib() -> float:
    return status_mib("VmHWM")


def reset_peak() -> None:
    """Reset VmHWM so the next peak is measured from here (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pass


def summary(name: str, seconds: list[float]) -> dict:
    row = {"measure": name, "median_s": statistics.median(seconds), "min_s": min(seconds),
           "max_s": max(seconds), "n": len(seconds)}
    print(f"{name:<58} median {row['median_s']:.3f} s  min {row['min_s']:.3f}  "
          f"max {row['max_s']:.3f}  (n={row['n']})")
    return row


def gpt2_small_random(n_ctx: int) -> Path:
    """A GPT-2-small-shaped checkpoint with random weights and the bundled tokenizer."""
    from transformers import GPT2Config, GPT2LMHeadModel

    path = Path(tempfile.gettempdir()) / f"atlas-gpt2-small-random-{n_ctx}"
    if not (path / "model.safetensors").exists():
        torch.manual_seed(0)
        config = GPT2Config(vocab_size=2048, n_positions=n_ctx, n_embd=768, n_layer=12,
                            n_head=12, bos_token_id=0, eos_token_id=0)
        GPT2LMHeadModel(config).save_pretrained(path)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(BUNDLED_DIR / name, path / name)
    return path


def prompt_of(n_tokens: int, salt: int) -> str:
    return " ".join(f"w{(i * 7 + salt) % 113}" for i in range(n_tokens))


def explorer_rerun(repeats: int) -> list[dict]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["model"] = "bundled"
    at.run()
    times = []
    for i in range(repeats):
        at.text_area(key="atlas_prompt").set_value(prompt_of(300, i))  # cut to the context
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
        assert not at.exception, at.exception
    return [summary("explorer rerun after a prompt change (bundled, 128 tok)", times)]


def capture_ratio(spec: ModelSpec, n_tokens: int, repeats: int) -> list[dict]:
    model = load(spec)
    prompt = prompt_of(n_tokens * 2, 1)
    ids, _ = tokenize(model, prompt, max_tokens=n_tokens)
    bare, ours = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.no_grad():
            model.bridge.run_with_cache(ids)
        bare.append(time.perf_counter() - start)
        gc.collect()
        start = time.perf_counter()
        capture(model, prompt, max_tokens=n_tokens)
        ours.append(time.perf_counter() - start)
        gc.collect()
    label = f"{model.facts.n_layers}x{model.facts.n_heads} model, {ids.shape[1]} tok"
    rows = [summary(f"bare run_with_cache ({label})", bare),
            summary(f"app capture ({label})", ours)]
    ratio = statistics.median(ours) / statistics.median(bare)
    print(f"{'  capture / run_with_cache (median)':<58} {ratio:.2f}x")
    rows.append({"measure": f"capture ratio ({label})", "ratio": ratio})
    return rows


def long_prompt_memory(path: Path) -> list[dict]:
    from models.capture.views import pooled_layer, scoped_weights
    from viz.heatmap import head_heatmap
    from viz.thumbnails import data_uri, pooled_png
    from viz.token_view import token_spans

    gc.collect()
    before_model = rss_mib()
    model = load(ModelSpec(str(path)))
    gc.collect()
    with_model = rss_mib()
    reset_peak()
    start = time.perf_counter()
    run = capture(model, prompt_of(3000, 2))
    token, layer, head = run.n_tokens - 1, 5, 3
    cells = [data_uri(pooled_png(pooled)) for li in range(run.facts.n_layers)
             for pooled in pooled_layer(run, li, 72)]
    rows = cols = slice(run.n_tokens - 160, run.n_tokens)
    fig = head_heatmap(run.window(layer, head, rows, cols), run.labels(), causal=True,
                       title="window", rows=rows, cols=cols, selected=token)
    weights = scoped_weights(run, "all", layer, head, token, "from")
    spans = token_spans(run.tokens, weights, token, "from")
    seconds = time.perf_counter() - start
    peak = peak_rss_mib()
    payload = {"heatmap": len(fig.to_json()), "thumbnails": len(json.dumps(cells)),
               "tokens": len(spans)}
    print(f"{'2,048-token explore (capture, 144 thumbnails, window, all-heads mean)':<58} "
          f"{seconds:.2f} s")
    print(f"  RSS: before model {before_model:.0f} MiB, with model {with_model:.0f} MiB, "
          f"peak while exploring {peak:.0f} MiB -> {peak - with_model:.0f} MiB above the model")
    print(f"  stored for rebuilding: {run.store.nbytes / 2**20:.0f} MiB "
          f"({'factored q, k, LSE' if run.factored else 'dense'}); "
          f"a dense fp32 stack would be {144 * run.n_tokens**2 * 4 / 2**20:.0f} MiB")
    print("  one explorer view sends: " + ", ".join(f"{k} {v / 1e6:.2f} MB"
                                                     for k, v in payload.items())
          + f" = {sum(payload.values()) / 1e6:.2f} MB")
    return [{"measure": "2048-token explore", "seconds": seconds, "rss_above_model_mib":
             peak - with_model, "payload_bytes": payload}]


def head_scores_time(path: Path, repeats: int) -> list[dict]:
    from models.heads.scores import run_scores

    model = load(ModelSpec(str(path)))
    prompt = prompt_of(1000, 3)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run = capture(model, prompt, max_tokens=512)
        run_scores(run)
        times.append(time.perf_counter() - start)
    return [summary("capture + head scores, 144 heads, 512 tok", times)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "app_speed.json")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    print(f"machine: {os.cpu_count()} CPUs, torch {torch.__version__}, threads "
          f"{torch.get_num_threads()}, CUDA {'yes' if torch.cuda.is_available() else 'no'}")
    small = gpt2_small_random(2048)
    rows = long_prompt_memory(small)  # first, so that no earlier model shares the process
    rows += explorer_rerun(repeats)
    rows += capture_ratio(ModelSpec("bundled"), 128, repeats)
    rows += capture_ratio(ModelSpec(str(small)), 512, repeats)
    rows += head_scores_time(small, repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
