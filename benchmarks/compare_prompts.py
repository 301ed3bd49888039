"""How long comparing two long prompts takes, from text to the ranked table, against one bare
forward pass of that length; prints numbers, never fails on time.

On SmolLM2 (or ``--model``), in ``--dtype``, two ~2,048-token prompts from the English corpus
that differ by one name (different token lengths: aligned like a diff). Each repeat measures, in
one process and one after the other:

- ``forward_s``: a bare Hugging Face forward pass with SDPA attention over prompt A's tokens, in
  the same dtype (the floor: the model itself, nothing of the app);
- ``prompts_to_ranking_s``: what the page does from the two texts to the ranked per-head table:
  both prompts captured (:func:`models.capture.run.capture`, as the page's capture jobs call
  it), every head's divergence (:func:`models.capture.compare.head_divergence`: alignment and
  fused divergence) and the ranking; with ``captures_s`` and ``compare_s`` its two parts;
- the resident-memory peak above the start of that span (the two runs' stores included), and
  of the divergence step alone against its estimate (sampled every 5 ms after ``malloc_trim``).

Once, after the repeats: the same comparison in word space (``words_compare_s``, the word splits
included). With ``--browser N``: the page itself in Debian's Chromium against a real server on
loopback, opened in compare mode on the two prompts, then ``N`` clicks on heads of its divergence
grid (the first included), each timed from the click event to the first frame that shows that
head's A, B and A − B heading and its three heatmaps painted, with the run finished
(``browser_click_s``, the page's clock) and as the driver sees it (``browser_click_driver_s``).
The process keeps freed blocks as the app's server does (:mod:`models.model.allocator`). The
machine's CPU, its kind and its matmul rates are measured first (:mod:`benchmarks.machine`). The
last line printed is one JSON object.

    python -m benchmarks.compare_prompts [--model smollm2] [--tokens 2048] [--dtype bfloat16]
        [--browser 12]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.app_speed import IDLE, bare_forward, bare_model, save_prompt
from benchmarks.browser import CANVASES_JS, CHROMIUM, app_page, settled_js
from benchmarks.machine import describe, line
from models.capture.compare import alignment_pairs, head_divergence
from models.capture.compare_cost import compare_cost
from models.capture.run import capture
from models.capture.word_split import split_words
from models.model.allocator import keep_freed_blocks
from models.model.forward import tokenize
from models.model.loading import load
from models.model.spec import ModelSpec

CORPUS = Path(__file__).resolve().parents[1] / "models/heads/finding/corpora/english.txt"
MB = 2**20


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
        self.peak = max(self.peak, self.rss())

    @property
    def extra(self) -> int:
        return self.peak - self.start


def prompts(model, n_tokens: int) -> tuple[str, str]:
    """A corpus passage of about ``n_tokens - 8`` tokens, and the same with one name swapped."""
    ids = model.tokenizer.encode(CORPUS.read_text(encoding="utf-8"), add_special_tokens=False)
    text = model.tokenizer.decode(ids[: n_tokens - 8])
    return text, text.replace("Elias", "Bartholomew", 1)


def prompts_to_ranking(model, text_a: str, text_b: str) -> dict:
    """Both captures, the divergence and the ranked table, timed, with their memory peaks."""
    gc.collect()
    with PeakRss() as whole:
        start = time.perf_counter()
        run_a, run_b = capture(model, text_a), capture(model, text_b)
        captured = time.perf_counter()
        with PeakRss() as step:
            result = head_divergence(run_a, run_b)
            table = result.ranking()
        done = time.perf_counter()
    return {
        "prompts_to_ranking_s": done - start,
        "captures_s": captured - start,
        "compare_s": done - captured,
        "peak_mb": whole.extra / MB,
        "compare_peak_mb": step.extra / MB,
        "runs": (run_a, run_b),
        "result": result,
        "table": table,
    }


GRID_HEAD = ".grid[data-kind='divergence'] button[data-head='{head}']"
COMPARE_TITLE = "Head {head}: A, B and A − B"
# Armed before a click: until the head's A, B and A - B heading is shown and its three
# heatmaps are painted for it (the run finished).
COMPARE_SETTLED_JS = settled_js("shows(title) && painted(head) >= 3", "[head, title]", CANVASES_JS)


def browser_clicks(spec: ModelSpec, text_a: str, text_b: str, shape: tuple[int, int], n: int):
    """Clicks on ``n`` heads of compare mode's divergence grid in Chromium (see the module
    docstring): ``{"in_page": [...], "driver": [...]}`` in seconds, or why it could not run."""
    if not Path(CHROMIUM).exists():
        return f"skipped: no {CHROMIUM}"
    from urllib.parse import urlencode

    n_layers, n_heads = shape
    query = {
        "model": spec.name,
        "dtype": spec.dtype,
        "pid": save_prompt(text_a),
        "mode": "compare",
        "bid": save_prompt(text_b),
        "layer": 0,
        "head": 0,
    }
    times: dict[str, list[float]] = {"in_page": [], "driver": []}
    log = Path(tempfile.gettempdir()) / "compare-speed-server.log"
    with app_page(log) as (base, page):
        page.goto(f"{base}/?{urlencode(query)}")
        start = page.get_by_role("button", name="Compare every head")
        grid = GRID_HEAD.format(head="0.0")
        deadline = time.monotonic() + 1800
        while not page.locator(grid).count() and time.monotonic() < deadline:
            if start.count():
                start.first.click()
            time.sleep(1.0)
        page.wait_for_selector(grid, timeout=60_000)
        page.wait_for_selector(IDLE, timeout=900_000)
        time.sleep(1.0)  # the first click comes once the page has finished drawing
        for i in range(n):
            head = f"{(i * 7 + 3) % n_layers}.{(i * 5 + 1) % n_heads}"
            title = COMPARE_TITLE.format(head=head)
            page.evaluate(COMPARE_SETTLED_JS, [head, title])
            began = time.perf_counter()
            page.locator(GRID_HEAD.format(head=head)).click()
            times["in_page"].append(page.evaluate("() => window.__settled") / 1000)
            page.wait_for_selector(IDLE)
            times["driver"].append(time.perf_counter() - began)
            print(
                f"browser: {head} settled after {times['in_page'][-1]:.3f} s in the page, "
                f"{times['driver'][-1]:.2f} s for the driver",
                flush=True,
            )
            time.sleep(0.5)
    return times


def median(rows: list[dict], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-words", action="store_true", help="skip the word-space compare")
    parser.add_argument(
        "--browser", type=int, default=0, metavar="N", help="time N head clicks in Chromium"
    )
    args = parser.parse_args()
    keep_freed_blocks()  # as the app's server does: both sides of the ratio run with it
    machine = describe(dtypes=tuple(dict.fromkeys(("float32", args.dtype))))
    spec = ModelSpec(args.model, dtype=args.dtype)
    model = load(spec)
    text_a, text_b = prompts(model, args.tokens)
    hf = bare_model(spec)
    ids, _ = tokenize(model, text_a)
    bare_forward(hf, ids)  # warm-up of both (first passes pick their kernels)
    capture(model, text_a)
    rows, forward = [], []
    print(f"machine: {line(machine)}", flush=True)
    for repeat in range(args.repeats):  # interleaved, so both see the same load on the machine
        for row in rows:  # only the last repeat's runs are kept
            row.pop("runs", None)
        forward.append(bare_forward(hf, ids))
        rows.append(prompts_to_ranking(model, text_a, text_b))
        print(
            f"repeat {repeat + 1}: forward {forward[-1]:.2f} s, prompts to ranking "
            f"{rows[-1]['prompts_to_ranking_s']:.2f} s (captures {rows[-1]['captures_s']:.2f} "
            f"s, compare {rows[-1]['compare_s']:.2f} s)",
            flush=True,
        )
    last = rows[-1]
    run_a, run_b = last["runs"]
    result = last["result"]
    factored = run_a.factored and run_b.factored
    pairs = alignment_pairs(run_a, run_b)
    estimate = compare_cost(model.facts, run_a.n_tokens, run_b.n_tokens, factored, pairs)
    word_s = None
    if not args.no_words:
        start = time.perf_counter()
        words = [
            split_words(model.tokenizer, run.prompt, run.token_ids, run.tokens)
            for run in (run_a, run_b)
        ]
        word_result = head_divergence(run_a, run_b, *words)
        word_s = time.perf_counter() - start
    clicks = (
        browser_clicks(spec, text_a, text_b, (model.facts.n_layers, model.facts.n_heads), n)
        if (n := args.browser)
        else None
    )
    top = last["table"].head(5)
    total, floor = median(rows, "prompts_to_ranking_s"), statistics.median(forward)
    report = {
        "model": args.model,
        "dtype": args.dtype,
        "tokens_a": run_a.n_tokens,
        "tokens_b": run_b.n_tokens,
        "machine": machine,
        "forward_s": floor,
        "prompts_to_ranking_s": total,
        "ratio_to_forward": total / floor,
        "captures_s": median(rows, "captures_s"),
        "compare_s": median(rows, "compare_s"),
        "compare_estimate_s": estimate.seconds(),
        "peak_mb": max(row["peak_mb"] for row in rows),
        "compare_peak_mb": max(row["compare_peak_mb"] for row in rows),
        "compare_estimate_peak_mb": estimate.peak_bytes / MB,
        "path": run_a.path,
        "alignment": result.alignment.describe(),
        "words_compare_s": word_s,
        "word_alignment": None if args.no_words else word_result.alignment.describe("words"),
        "browser_click_s": clicks["in_page"] if isinstance(clicks, dict) else clicks,
        "browser_click_driver_s": clicks["driver"] if isinstance(clicks, dict) else None,
        "top_heads": [
            [h, round(float(v), 5)] for h, v in zip(top["head"], top["divergence"], strict=True)
        ],
        "repeats": {
            "forward_s": forward,
            **{
                key: [row[key] for row in rows]
                for key in ("prompts_to_ranking_s", "captures_s", "compare_s")
            },
        },
    }
    print(
        f"{args.model}, {run_a.n_tokens:,} and {run_b.n_tokens:,} tokens, {args.dtype}: "
        f"bare forward {floor:.2f} s; prompts to ranking {total:.2f} s = "
        f"{total / floor:.2f}x (captures {report['captures_s']:.2f} s, compare "
        f"{report['compare_s']:.2f} s, estimated {estimate.seconds():.2f} s)"
    )
    for key, value in report.items():
        if key not in ("machine", "repeats"):
            print(f"  {key}: {value}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
