"""How long comparing two long prompts takes, against its cost estimate; prints numbers, never
fails on time.

On SmolLM2 (or ``--model``), two ~2,048-token prompts from the English corpus that differ by one
name (different token lengths: aligned like a diff) are captured (q/k/LSE store at this length),
then every head's divergence is computed in token space and in word space. Reports the measured
seconds, the estimate of :func:`models.capture.compare.compare_cost`, the extra memory measured
(resident set sampled every 5 ms after ``malloc_trim``) against the estimated peak, the CPU
seconds (all threads), and the top heads.

    python -m benchmarks.compare_prompts [--model smollm2] [--tokens 2048]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from models.capture.compare import compare_cost, head_divergence
from models.capture.run import capture
from models.capture.word_split import split_words
from models.model.loading import load
from models.model.spec import ModelSpec

CORPUS = Path(__file__).resolve().parents[1] / "models/heads/finding/corpora/english.txt"


class PeakRss:
    """Largest resident set size seen while the block runs, minus the size at its start."""

    def __enter__(self) -> PeakRss:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap back to the system: RSS = live
        self.start = self.peak = self.rss()
        self.running = True
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()
        return self

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.rss())
            time.sleep(0.005)

    def __exit__(self, *exc) -> None:
        self.running = False
        self.thread.join()

    @property
    def extra(self) -> int:
        return self.peak - self.start


def prompts(model, n_tokens: int) -> tuple[str, str]:
    """A corpus passage of about ``n_tokens - 8`` tokens, and the same with one name swapped."""
    ids = model.tokenizer.encode(CORPUS.read_text(encoding="utf-8"), add_special_tokens=False)
    text = model.tokenizer.decode(ids[: n_tokens - 8])
    return text, text.replace("Elias", "Bartholomew", 1)


def timed(work):
    """Wall seconds, CPU seconds of every thread, and the result."""
    start, cpu = time.perf_counter(), time.process_time()
    out = work()
    return time.perf_counter() - start, time.process_time() - cpu, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tokens", type=int, default=2048)
    args = parser.parse_args()
    model = load(ModelSpec(args.model))
    text_a, text_b = prompts(model, args.tokens)
    capture_s, _, run_a = timed(lambda: capture(model, text_a))
    run_b = capture(model, text_b)
    est = compare_cost(model.facts, run_a.n_tokens, run_b.n_tokens, run_a.factored)
    with PeakRss() as memory:
        seconds, compare_cpu, result = timed(lambda: head_divergence(run_a, run_b))
    words_a = split_words(model.tokenizer, text_a, run_a.token_ids, run_a.tokens)
    words_b = split_words(model.tokenizer, text_b, run_b.token_ids, run_b.tokens)
    word_s, _, word_result = timed(lambda: head_divergence(run_a, run_b, words_a, words_b))
    top = result.ranking().head(5)
    row = {
        "model": args.model,
        "tokens_a": run_a.n_tokens,
        "tokens_b": run_b.n_tokens,
        "factored": run_a.factored,
        "alignment": result.alignment.describe(),
        "capture_s": capture_s,
        "compare_cpu_s": compare_cpu,
        "compare_s": seconds,
        "estimate_s": est.seconds(),
        "ratio_measured_to_estimate": seconds / est.seconds,
        "estimate_flops": est.flops,
        "extra_rss_bytes": memory.extra,
        "estimate_peak_bytes": est.peak_bytes,
        "words_compare_s": word_s,
        "words": [words_a.n_words, words_b.n_words],
        "word_alignment": word_result.alignment.describe(),
        "top_heads": [
            [h, round(float(v), 4)] for h, v in zip(top["head"], top["divergence"], strict=True)
        ],
        "threads": torch.get_num_threads(),
    }
    for key, value in row.items():
        print(f"{key}: {value}")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
