"""How fast and how lean the explorer is on a real model and a long prompt, in any dtype.

Prints measured numbers and never fails on time. On one model, dtype and prompt length it
measures, in the same process:

- the machine: a 2,048 x 2,048 matrix product's rate in float32 and bfloat16 (GFLOP/s), the
  physical reference every pass below is compared with;
- ``forward_s``: a bare Hugging Face forward pass of the same tokens with SDPA attention in the
  same dtype (the floor: the model itself, logits for every position, no app), and
  ``forward_no_logits_s`` (logits for the last position only, as a capture asks);
- ``capture_s`` (``--core``, no Streamlit): :func:`models.capture.run.capture` alone (the fused
  pass with float32 statistics, overviews, thumbnails, value norms) and its ratio to
  ``forward_s``, the path it took and its self-check, and the measured pattern difference
  from float32 on the first rows (:mod:`models.capture.precision`);
- ``prompt_to_view_s``: a prompt change to a drawn explorer (AppTest reruns the real app.py;
  the driver looks for the run's end every 5 ms, not AppTest's every millisecond, which took
  processor time from the app) and its ratio to ``forward_s``; work the page leaves running
  behind the drawn view (below float32, the comparison with float32) finishes outside the
  timed span, before the next measurement starts. The process keeps freed blocks as the app's
  server does (:mod:`models.model.allocator`), for both sides of every ratio;
- ``click_s``: a click on another head as an AppTest rerun; with ``--browser``, clicks in
  Chromium against a real server until the new head's view has settled (median, p95, first),
  timed in the page from the click event to the first frame that shows the settled view
  (``browser_click``) and as the driver sees it (``browser_click_driver``: adds Playwright's
  round trips and polling);
- ``peak_rss_above_model_mb``: the resident-memory peak of one prompt's work in the app (or
  of the capture alone), above what the process held just before it: the loaded models and,
  in the app, the results of earlier prompts it keeps (within its result budget);
- each pass's achieved GFLOP/s (the model's forward FLOPs over its seconds);
- the view's payload and the peers' (BertViz, CircuitsVis) when those are installed.

    python -m benchmarks.app_speed --model smollm2 --tokens 2048 --dtype bfloat16 --core
    python -m benchmarks.app_speed --model smollm2 --tokens 2048 --json --browser
    python -m benchmarks.app_speed --model smollm2 --tokens 8192 --json --repeats 1
    python -m benchmarks.app_speed --model smollm2 --peers 64,256,1024   # peers' payload only
    python -m benchmarks.app_speed --model smollm2 --core --device cuda --json  # on a GPU

``--device cuda`` runs the core measurement (the capture against the bare forward pass) on the
GPU, with the GPU's matmul rates; the page itself runs on the CPU, so it needs ``--core``.

The last line printed with ``--json`` is one JSON object with every number. Everything that
depends on how the app is written (widget keys, page names, selectors, the prompt store) is in
the block right below the imports; update it there when the app changes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ATLAS_JOB_WAIT_S", "3600")  # AppTest waits for the capture in one run

import numpy as np
import torch

from benchmarks.browser import CANVASES_JS, CHROMIUM, app_page, settled_js
from benchmarks.machine import describe
from models.model.allocator import keep_freed_blocks
from models.model.hardware import low_precision, matmul_rates
from models.model.loading import load
from models.model.spec import ModelSpec

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "README.md"

# --- how the app is driven: every key, page and selector in one place ---------------------
APP_FILE = ROOT / "app.py"
MODEL_PARAM, PROMPT_PARAM, PROMPT_ID_PARAM = "model", "prompt", "pid"  # URL query parameters
PROMPT_KEY = "atlas_prompt"  # the sidebar's prompt text area
DTYPE_KEY = "atlas_dtype"  # the sidebar's dtype select box
DTYPE_LABEL = "Dtype"  # its label, for the browser
HEAD_KEY = "explorer_head"  # the explorer's head select box
HEAD_BUTTON = "button[data-head='{head}']"  # a thumbnail in the grid (browser)
HEAD_TITLE = "Head {head}"  # the heading that shows the selected head
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
HEATMAP = ".hm canvas[aria-label]"  # the detail heatmap, painted (browser)
HEATMAP_OF = '.hm canvas[aria-label^="Head {head}:"]'  # ... painted for that head
HEATMAP_COMPONENT = "atlas_heatmap"  # its component (AppTest)
PROMPT_STORE = "ui.runtime.prompt_store"  # module with PromptStore (server-side long prompts)


def note(text: str) -> None:
    """A progress line on stderr (the numbers go to stdout)."""
    now = time.time()
    stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"
    print(f"[{stamp}] {text}", file=sys.stderr, flush=True)


def status_mib(field: str) -> float:
    """A memory line of /proc/self/status (``VmRSS`` now, ``VmHWM`` peak) in MiB."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak() -> None:
    """Reset VmHWM so the next peak is measured from here (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pass


def prompt_of(model, n_tokens: int, salt: int) -> str:
    """Natural text (this repository's README, repeated) cut to ``n_tokens`` tokens; ``salt``
    changes the first word so every repeat is a new prompt."""
    text = f"Take {salt}. " + TEXT.read_text(encoding="utf-8")
    while len(model.tokenizer(text, add_special_tokens=False)["input_ids"]) < n_tokens:
        text += "\n\n" + text
    ids = model.tokenizer(text, add_special_tokens=False)["input_ids"][: n_tokens - 1]
    return model.tokenizer.decode(ids)


POLL_S = 0.005  # how often the driver looks whether a script run has ended


def quiet_wait() -> None:
    """AppTest waits for a script run by checking, every millisecond, the whole list of the
    run's events: on two cores that polling takes processor time (and the GIL) from the app
    it times. The driver here checks every :data:`POLL_S` instead (at most 5 ms later)."""
    from streamlit.testing.v1 import local_script_runner as runner

    def wait(script: Any, timeout: float = 3) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if script.script_stopped():
                return
            time.sleep(POLL_S)
        script.request_stop()  # as AppTest does: stop the run before saying so
        script.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")

    runner.require_widgets_deltas = wait


def app_session(spec: ModelSpec):
    """The real app in AppTest on ``spec``'s model and dtype, after a first short prompt."""
    from streamlit.testing.v1 import AppTest

    quiet_wait()

    at = AppTest.from_file(str(APP_FILE), default_timeout=3600)
    at.query_params[MODEL_PARAM] = spec.name
    at.query_params[PROMPT_PARAM] = "warm up"
    at.run()
    if spec.dtype != "float32":
        at.selectbox(key=DTYPE_KEY).set_value(spec.dtype)
        at.run()
    assert not at.exception, at.exception
    return at


def prompt_to_view(at, prompt: str) -> float:
    """Seconds from a new prompt to a drawn explorer (one AppTest run)."""
    at.text_area(key=PROMPT_KEY).set_value(prompt)
    start = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - start
    assert not at.exception, at.exception
    assert drew_heatmap(at), "the explorer drew no heatmap"
    settle_jobs()
    return seconds


def drew_heatmap(at) -> bool:
    """Whether the last AppTest run drew the explorer's detail heatmap."""

    def walk(node) -> bool:
        kids = getattr(node, "children", None)
        for child in kids.values() if isinstance(kids, dict) else []:
            proto = getattr(child, "proto", None)
            if getattr(proto, "component_name", None) == HEATMAP_COMPONENT or walk(child):
                return True
        return False

    return walk(at._tree)


def settle_jobs(timeout_s: float = 600.0) -> None:
    """Wait until the app's job pool has nothing left running (background work of a view)."""
    from ui.runtime import server

    deadline = time.monotonic() + timeout_s
    while server.current().pool.busy() and time.monotonic() < deadline:
        time.sleep(0.05)


def clicks(at, n_heads: int, repeats: int) -> list[float]:
    """Seconds of AppTest reruns after picking another head (the whole script: an upper bound
    of the fragment a browser reruns)."""
    times = []
    for i in range(repeats):
        at.selectbox(key=HEAD_KEY).set_value((i + 1) % n_heads)
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
        assert not at.exception, at.exception
    return times


def view_payload(at) -> dict[str, int]:
    """Bytes of every element the last AppTest run drew, by element type (what the browser is
    sent for one view)."""
    sizes: dict[str, int] = {}

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ByteSize") and not getattr(node, "children", None):
            kind = str(getattr(node, "type", type(node).__name__))
            sizes[kind] = sizes.get(kind, 0) + proto.ByteSize()
        for child in (getattr(node, "children", None) or {}).values():
            walk(child)

    walk(at._tree)
    return sizes


def save_prompt(prompt: str) -> str:
    """Store a long prompt where a server started from here finds it; its ``pid``."""
    import importlib

    store = importlib.import_module(PROMPT_STORE)
    cache = Path(os.environ.get("ATLAS_CACHE", Path.home() / ".cache" / "attention-atlas"))
    return store.PromptStore(cache / "prompts").save(prompt)


# Armed in the page before a click: until the head's heading is shown and its heatmap painted
# for it (the canvas may be drawn anew, so it is looked for on every frame).
SETTLED_JS = settled_js("shows(title) && painted(head) >= 1", "[head, title]", CANVASES_JS)


def browser_clicks(
    spec: ModelSpec, prompt: str, n_layers: int, n_heads: int, repeats: int
) -> dict[str, list[float]] | str:
    """Seconds from a click on a head's thumbnail until that head's view has settled (its
    heading shown, its heatmap painted, the run finished), in Debian's Chromium against a real
    server on loopback (the first click included): ``in_page`` from the click event to the
    first frame that shows it (the page's own clock), ``driver`` as Playwright's round trips
    see it (adds their polling). A string saying why when it cannot run."""
    if not Path(CHROMIUM).exists():
        return f"skipped: no {CHROMIUM}"
    times: dict[str, list[float]] = {"in_page": [], "driver": []}
    log = Path(tempfile.gettempdir()) / "app-speed-server.log"
    with app_page(log) as (base, page):
        page.goto(f"{base}/?{MODEL_PARAM}={spec.name}&{PROMPT_ID_PARAM}={save_prompt(prompt)}")
        note("browser: page opened, waiting for the grid")
        page.wait_for_selector("button[data-head]", timeout=900_000)
        note("browser: grid drawn")
        if spec.dtype != "float32":
            page.locator('[data-testid="stSelectbox"]').filter(has_text=DTYPE_LABEL).click()
            page.get_by_role("option", name=spec.dtype, exact=True).click()
            page.wait_for_selector(IDLE, timeout=900_000)
            page.wait_for_selector("button[data-head]", timeout=900_000)
        # The first click comes once the page has finished drawing, as a reader's would.
        page.wait_for_selector(IDLE, timeout=900_000)
        page.wait_for_selector(HEATMAP, timeout=900_000)
        time.sleep(1.0)
        for i in range(repeats):
            head = f"{(i * 7 + 3) % n_layers}.{(i * 5 + 1) % n_heads}"
            title = HEAD_TITLE.format(head=head)
            note(f"browser: click on {head}")
            page.evaluate(SETTLED_JS, [head, title])
            start = time.perf_counter()
            page.locator(HEAD_BUTTON.format(head=head)).click()
            in_page = page.evaluate("() => window.__settled") / 1000
            page.wait_for_function(
                f"() => [...document.querySelectorAll('h3')].some("
                f"h => h.textContent.trim() === '{title}')"
            )
            page.wait_for_selector(HEATMAP_OF.format(head=head))
            page.wait_for_selector(IDLE)
            times["driver"].append(time.perf_counter() - start)
            times["in_page"].append(in_page)
            note(
                f"browser: {head} settled after {in_page:.3f} s in the page, "
                f"{times['driver'][-1]:.2f} s for the driver"
            )
            time.sleep(0.5)
    return times


def peers(model, ids: torch.Tensor) -> dict[str, float | str]:
    """The same view in BertViz (head view, every layer) and CircuitsVis (attention heads, one
    layer), measured from the HTML they produce; skipped when they are not installed, and
    BertViz above 256 tokens (its HTML grows with layers x heads x n^2: gigabytes)."""
    from models.capture.run import capture

    run = capture(model, model.tokenizer.decode(ids[0], skip_special_tokens=True))
    out: dict[str, float | str] = {"tokens": run.n_tokens}
    try:
        from bertviz import head_view
    except ImportError:
        out["bertviz"] = "not installed"
    else:
        if run.n_tokens <= 256:
            attention = tuple(
                torch.from_numpy(run.layer_patterns(layer))[None]
                for layer in range(model.facts.n_layers)
            )
            html = head_view(attention, list(run.tokens), html_action="return")
            out["bertviz_mb"] = len(html.data) / 1e6
        else:
            out["bertviz"] = "skipped above 256 tokens"
    try:
        import circuitsvis as cv
    except ImportError:
        out["circuitsvis"] = "not installed"
    else:
        html = str(
            cv.attention.attention_heads(attention=run.layer_patterns(0), tokens=list(run.tokens))
        )
        out["circuitsvis_one_layer_mb"] = len(html) / 1e6
    return out


def bare_model(spec: ModelSpec):
    """The checkpoint as plain transformers loads it, SDPA attention, the spec's dtype and
    device."""
    from transformers import AutoModel, AutoModelForCausalLM

    path, dtype = spec.path_or_name, spec.torch_dtype
    try:
        hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa", dtype=dtype)
    except ValueError:
        hf = AutoModel.from_pretrained(path, attn_implementation="sdpa", dtype=dtype)
    return hf.to(spec.device).eval()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bare_forward(hf, ids: torch.Tensor, all_logits: bool = True) -> float:
    """Seconds of one bare forward pass (logits for every position, or the last one only), on
    the model's device (a GPU's queue waited for at both ends)."""
    extra = {} if all_logits or not hasattr(hf, "generate") else {"logits_to_keep": 1}
    device = next(hf.parameters()).device
    ids = ids.to(device)
    synchronize(device)
    start = time.perf_counter()
    with torch.no_grad():
        hf(ids, use_cache=False, **extra) if hasattr(hf, "generate") else hf(ids)
    synchronize(device)
    return time.perf_counter() - start


def core(model, hf, prompts: list[str], ids: torch.Tensor) -> dict:
    """The capture alone against the bare forward pass, interleaved, with its memory peak."""
    from models.capture.precision import pattern_difference
    from models.capture.run import capture

    bare_forward(hf, ids)  # warm-up of both (first bf16 passes pick their kernels)
    capture(model, prompts[0])
    gc.collect()
    base = status_mib("VmRSS")
    forward, no_logits, captured, peak = [], [], [], base
    run = capture(model, "warm up")
    for prompt in prompts:
        forward.append(bare_forward(hf, ids))
        no_logits.append(bare_forward(hf, ids, all_logits=False))
        del run
        gc.collect()
        reset_peak()
        start = time.perf_counter()
        run = capture(model, prompt)
        captured.append(time.perf_counter() - start)
        peak = max(peak, status_mib("VmHWM"))
    start = time.perf_counter()
    difference = pattern_difference(model, run)
    difference_s = time.perf_counter() - start
    check = getattr(run.store, "check", None)
    return {
        "forward_s": forward,
        "forward_no_logits_s": no_logits,
        "capture_s": captured,
        "peak_rss_above_model_mb": peak - base,
        "store_mb": run.nbytes / 2**20,
        "path": run.path,
        "fallback": run.fallback,
        "check": None if check is None else check.__dict__,
        "pattern_difference": None if difference is None else difference.__dict__,
        "pattern_difference_s": difference_s,
    }


def in_app(
    model, hf, spec: ModelSpec, prompts: list[str], ids: torch.Tensor, browser: bool
) -> dict:
    """Prompt to view and clicks through the real app (AppTest; Chromium with ``browser``)."""
    bare_forward(hf, ids)  # warm-up
    at = app_session(spec)  # the app loads its own copy of the model, cached from here on
    gc.collect()
    view, forward, peak = [], [], 0.0
    for prompt in prompts:  # interleaved, so both see the same load on the machine
        reset_peak()  # the peak counts the app's work only, not the bare forward pass
        before = status_mib("VmRSS")  # the models, and the earlier prompts' results it keeps
        view.append(prompt_to_view(at, prompt))
        note(f"prompt to view: {view[-1]:.2f} s")
        peak = max(peak, status_mib("VmHWM") - before)
        forward.append(bare_forward(hf, ids))
    click = clicks(at, model.facts.n_heads, max(3, len(prompts)))
    payload = view_payload(at)
    clicks_in_browser = (
        browser_clicks(spec, prompts[0], model.facts.n_layers, model.facts.n_heads, 12)
        if browser
        else "not asked"
    )
    return {
        "forward_s": forward,
        "prompt_to_view_s": view,
        "click_s": click,
        "peak_rss_above_model_mb": peak,
        "payload": payload,
        "browser_click_s": (
            clicks_in_browser["in_page"]
            if isinstance(clicks_in_browser, dict)
            else clicks_in_browser
        ),
        "browser_click_driver_s": (
            clicks_in_browser["driver"]
            if isinstance(clicks_in_browser, dict)
            else clicks_in_browser
        ),
    }


def spread(times: list[float] | str) -> dict | str:
    """Median, 95th percentile and first of a list of seconds (a string passes through)."""
    if isinstance(times, str):
        return times
    if not times:
        return "no clicks"
    return {
        "median": statistics.median(times),
        "p95": float(np.percentile(times, 95)),
        "first": times[0],
        "n": len(times),
    }


def summary(facts, n: int, measured: dict, rates: dict[str, float]) -> dict:
    """Medians, ratios to the forward pass and achieved GFLOP/s of every timed pass."""
    flops = facts.forward_flops(n)
    forward = statistics.median(measured["forward_s"])
    out = {"forward_s": forward, "forward_gflops": flops / forward / 1e9, "machine_gflops": rates}
    for name in ("forward_no_logits_s", "capture_s", "prompt_to_view_s"):
        if name in measured:
            seconds = statistics.median(measured[name])
            out[name] = seconds
            out[name.removesuffix("_s") + "_ratio"] = seconds / forward
            out[name.removesuffix("_s") + "_gflops"] = flops / seconds / 1e9
    if "click_s" in measured:
        out["click_s"] = statistics.median(measured["click_s"])
    if "browser_click_s" in measured:
        out["browser_click"] = spread(measured["browser_click_s"])
        out["browser_click_driver"] = spread(measured["browser_click_driver_s"])
    return out


def report(name: str, n: int, dtype: str, result: dict) -> None:
    rates = result["machine_gflops"]
    print(f"{name}, {n:,} tokens, {dtype}")
    print(
        "  machine matmul 2048^2      "
        + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in rates.items())
    )
    print(
        f"  bare HF SDPA forward       {result['forward_s']:.2f} s "
        f"({result['forward_gflops']:.0f} GFLOP/s)"
    )
    for key, label in (
        ("forward_no_logits", "forward, last logits only"),
        ("capture", "capture alone (core)"),
        ("prompt_to_view", "prompt change -> explorer"),
    ):
        if key + "_s" in result:
            print(
                f"  {label:<26} {result[key + '_s']:.2f} s = {result[key + '_ratio']:.2f}x "
                f"the forward pass ({result[key + '_gflops']:.0f} GFLOP/s)"
            )
    for key in (
        "path",
        "fallback",
        "check",
        "pattern_difference",
        "store_mb",
        "click_s",
        "browser_click",
        "browser_click_driver",
        "peak_rss_above_model_mb",
        "payload_mb",
        "peers",
    ):
        if key in result:
            print(f"  {key:<26} {result[key]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="bundled, smollm2, a name or a path")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument(
        "--core",
        action="store_true",
        help="time the capture alone against the forward pass (no Streamlit)",
    )
    parser.add_argument(
        "--browser", action="store_true", help="also time clicks in Chromium against a real server"
    )
    parser.add_argument("--peers", help="only the peers' payload, at these token counts (a,b,c)")
    parser.add_argument(
        "--device", default="cpu", choices=["cpu", "cuda"], help="where the model runs (--core)"
    )
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: this machine has no CUDA GPU")
    if args.device == "cuda" and not args.core:
        parser.error("--device cuda measures the capture alone: add --core")
    spec = ModelSpec(args.model, dtype=args.dtype, device=args.device)
    if args.peers:
        model = load(spec)
        rows = [
            peers(model, model.bridge.to_tokens(prompt_of(model, int(n), 0)))
            for n in args.peers.split(",")
        ]
        for row in rows:
            print(row)
        print(json.dumps(rows))
        return
    keep_freed_blocks()  # as the app's server does: both sides of every ratio run with it
    threads = torch.get_num_threads()
    support = low_precision("bfloat16", args.device)
    machine = describe(rates=False)
    gpu = f", GPU {torch.cuda.get_device_name()}" if args.device == "cuda" else ""
    print(
        f"machine: {machine['cpu']} ({machine['cpu_kind']}), {os.cpu_count()} CPUs, torch "
        f"{torch.__version__} ({threads} threads){gpu}, bfloat16 "
        f"{'native' if support.native else 'emulated'} ({support.how})"
    )
    rates = matmul_rates(device=args.device)
    model = load(spec)
    prompts = [prompt_of(model, args.tokens, salt) for salt in range(args.repeats)]
    ids = model.bridge.to_tokens(prompts[0])
    n = int(ids.shape[1])
    hf = bare_model(spec)
    measured = (
        core(model, hf, prompts, ids)
        if args.core
        else in_app(model, hf, spec, prompts, ids, args.browser)
    )
    result = {
        "model": model.facts.name,
        "dtype": args.dtype,
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "cpu": machine["cpu"],
        "cpu_kind": machine["cpu_kind"],
        "tokens": n,
        "threads": threads,
        "bfloat16_native": support.native,
        **summary(model.facts, n, measured, rates),
    }
    for key in (
        "path",
        "fallback",
        "check",
        "pattern_difference",
        "pattern_difference_s",
        "store_mb",
        "peak_rss_above_model_mb",
    ):
        if key in measured:
            result[key] = measured[key]
    if "payload" in measured:
        result["payload_mb"] = sum(measured["payload"].values()) / 1e6
        result["payload_parts_mb"] = {k: v / 1e6 for k, v in measured["payload"].items()}
    del hf
    if not args.core:
        result["peers"] = (
            peers(model, ids)
            if n <= 1024
            else "skipped above 1,024 tokens (their HTML grows with n^2 per head)"
        )
    result["runs"] = {k: v for k, v in measured.items() if k.endswith("_s")}
    report(model.facts.name, n, args.dtype, result)
    if args.json:
        print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
