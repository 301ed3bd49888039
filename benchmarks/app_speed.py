"""How fast and how lean the explorer is on a real model and a long prompt.

Prints measured numbers and never fails on time. On one model and one prompt length it measures,
in the same process:

- ``forward_s``: a bare Hugging Face forward pass of the same tokens with SDPA attention (the
  floor: the model itself, no app);
- ``prompt_to_view_s``: a prompt change to a drawn explorer (AppTest reruns the real app.py:
  capture, head grid, overview, detail heatmap, token strip), and its ratio to ``forward_s``;
- ``click_s``: a click on another head, as a rerun of the page's view (AppTest reruns the whole
  script, so this is an upper bound of the fragment the browser reruns); with ``--browser``,
  ``browser_click_s``: the same click in Chromium against a real server, until the new head's
  view has arrived;
- ``peak_rss_above_model_mb``: the resident-memory peak while capturing and drawing, above what
  the process held with the models loaded;
- ``payload_mb``: the bytes one explorer view sends to the browser (grid pictures, overview,
  heatmap JSON, token strip HTML);
- the peers' payload for the same view (BertViz's head view, CircuitsVis' attention heads),
  computed from their HTML when those packages are installed, else skipped.

    python benchmarks/app_speed.py --model smollm2 --tokens 2048 --json
    python benchmarks/app_speed.py --model smollm2 --tokens 8192 --json --repeats 1
    python benchmarks/app_speed.py --model bundled --tokens 128
    python benchmarks/app_speed.py --model smollm2 --peers 64,256,1024   # peers' payload only

The last line printed with ``--json`` is one JSON object with every number.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ATLAS_JOB_WAIT_S", "3600")  # AppTest waits for the capture in one run

import torch  # noqa: E402

from models.model.loading import load  # noqa: E402
from models.model.spec import ModelSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "README.md"


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


def bare_forward(spec: ModelSpec, ids: torch.Tensor, repeats: int) -> tuple[list[float], object]:
    """Seconds of a plain HF SDPA forward pass (no app), and the model (kept loaded)."""
    from transformers import AutoModel, AutoModelForCausalLM

    path = spec.path_or_name
    try:
        hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa").eval()
    except ValueError:
        hf = AutoModel.from_pretrained(path, attn_implementation="sdpa").eval()
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        with torch.no_grad():
            hf(ids, use_cache=False) if hasattr(hf, "generate") else hf(ids)
        times.append(time.perf_counter() - start)
    return times[1:], hf  # the first pass warms up


def bare_forward_again(hf, ids: torch.Tensor) -> list[float]:
    start = time.perf_counter()
    with torch.no_grad():
        hf(ids, use_cache=False) if hasattr(hf, "generate") else hf(ids)
    return [time.perf_counter() - start]


def app_session(name: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=3600)
    at.query_params["model"] = name
    at.query_params["prompt"] = "warm up"
    at.run()
    assert not at.exception, at.exception
    return at


def prompt_to_view(at, prompts: list[str]) -> list[float]:
    times = []
    for prompt in prompts:
        at.text_area(key="atlas_prompt").set_value(prompt)
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
        assert not at.exception, at.exception
        assert at.get("plotly_chart"), "the explorer drew no heatmap"
    return times


def clicks(at, n_heads: int, repeats: int) -> list[float]:
    times = []
    for i in range(repeats):
        at.selectbox(key="explorer_head").set_value((i + 1) % n_heads)
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
        assert not at.exception, at.exception
    return times


def browser_clicks(name: str, prompt: str, n_layers: int, n_heads: int,
                   repeats: int) -> list[float] | str:
    """Seconds from a click on a head's thumbnail to that head's view in Debian's Chromium,
    against a real server on loopback; a string saying why when it cannot run."""
    import socket
    import subprocess
    import sys

    if not Path("/usr/bin/chromium").exists():
        return "skipped: no /usr/bin/chromium"
    from playwright.sync_api import sync_playwright

    from ui import prompt_store

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "ATLAS_JOB_WAIT_S": "3600"}
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
                               "--server.port", str(port), "--server.address", "127.0.0.1",
                               "--server.headless", "true"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync"]
    times = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=flags)
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            for _ in range(120):
                try:
                    page.goto(f"http://127.0.0.1:{port}/?model={name}&pid="
                              f"{prompt_store.save(prompt)}")
                    break
                except Exception:  # noqa: BLE001 - the server is still starting
                    time.sleep(1)
            page.wait_for_selector("button[data-head]", timeout=900_000)
            for i in range(repeats):
                head = f"{(i * 7 + 3) % n_layers}.{(i * 5 + 1) % n_heads}"
                start = time.perf_counter()
                page.locator(f"button[data-head='{head}']").click()
                page.wait_for_function(f"() => [...document.querySelectorAll('h3')].some("
                                       f"h => h.textContent.trim() === 'Head {head}')")
                page.wait_for_selector('[data-testid="stApp"][data-test-script-state='
                                       '"notRunning"]')
                times.append(time.perf_counter() - start)
                time.sleep(0.5)
            browser.close()
    finally:
        server.terminate()
        server.wait(30)
    return times


def view_payload(spec: ModelSpec, prompt: str) -> dict[str, int]:
    """Bytes one explorer view sends, built exactly as the page builds them."""
    import numpy as np

    from models.capture.views import scoped_weights
    from ui import caches
    from viz.heatmap import head_heatmap
    from viz.token_view import token_spans

    run = caches.run(spec, prompt)
    token, n = run.n_tokens - 1, run.n_tokens
    rows = slice(max(n - 160, 0), n)
    cols = list(range(max(n - 160, 0), n))
    pattern = run.window(0, 0, rows, slice(cols[0], cols[-1] + 1))
    fig = head_heatmap(pattern, run.labels(), causal=run.facts.causal, title="", rows=rows,
                       cols=cols, selected=token, scale="sqrt")
    weights = scoped_weights(run, "head", 0, 0, token, "from")
    sent = {"thumbnails": len(json.dumps(caches.thumbnails(spec, prompt))),
            "heatmap": len(fig.to_json()),
            "tokens": len(token_spans(run.tokens, np.asarray(weights), token, "from"))}
    if n > 160:  # the overview is shown once the pattern outgrows the detail window
        sent["overview"] = len(caches.overview_png(spec, prompt, 0, 0, True))
    return sent


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
            attention = tuple(torch.from_numpy(run.layer_patterns(layer))[None]
                              for layer in range(model.facts.n_layers))
            html = head_view(attention, list(run.tokens), html_action="return")
            out["bertviz_mb"] = len(html.data) / 1e6
        else:
            out["bertviz"] = "skipped above 256 tokens"
    try:
        import circuitsvis as cv
    except ImportError:
        out["circuitsvis"] = "not installed"
    else:
        html = str(cv.attention.attention_heads(attention=run.layer_patterns(0),
                                                tokens=list(run.tokens)))
        out["circuitsvis_one_layer_mb"] = len(html) / 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="bundled, smollm2, a name or a path")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--browser", action="store_true",
                        help="also time clicks in Chromium against a real server")
    parser.add_argument("--peers", help="only the peers' payload, at these token counts (a,b,c)")
    args = parser.parse_args()
    if args.peers:
        model = load(ModelSpec(args.model))
        rows = [peers(model, model.bridge.to_tokens(prompt_of(model, int(n), 0)))
                for n in args.peers.split(",")]
        for row in rows:
            print(row)
        print(json.dumps(rows))
        return
    threads = torch.get_num_threads()
    print(f"machine: {os.cpu_count()} CPUs, torch {torch.__version__} ({threads} threads), "
          f"CUDA {'yes' if torch.cuda.is_available() else 'no'}")
    spec = ModelSpec(args.model)
    model = load(spec)
    prompts = [prompt_of(model, args.tokens, salt) for salt in range(args.repeats)]
    ids = model.bridge.to_tokens(prompts[0])
    n = int(ids.shape[1])
    forward, hf = bare_forward(spec, ids, 0)  # loads the plain model and warms it up
    at = app_session(args.model)  # the app loads its own copy of the model, cached from here on
    gc.collect()
    with_models = status_mib("VmRSS")
    view, peak = [], with_models
    for prompt in prompts:  # interleaved, so both see the same load on the machine
        reset_peak()  # the peak counts the app's work only, not the bare forward pass
        view += prompt_to_view(at, [prompt])
        peak = max(peak, status_mib("VmHWM"))
        forward += bare_forward_again(hf, ids)
    click = clicks(at, model.facts.n_heads, max(3, args.repeats))
    payload = view_payload(spec, prompts[0])
    in_browser = browser_clicks(args.model, prompts[0], model.facts.n_layers,
                                model.facts.n_heads, 5) if args.browser else "not asked"
    result = {
        "model": model.facts.name, "tokens": n, "threads": threads,
        "forward_s": statistics.median(forward),
        "prompt_to_view_s": statistics.median(view),
        "ratio": statistics.median(view) / statistics.median(forward),
        "click_s": statistics.median(click),
        "browser_click_s": (statistics.median(in_browser) if isinstance(in_browser, list)
                            else in_browser),
        "peak_rss_above_model_mb": peak - with_models,
        "payload_mb": sum(payload.values()) / 1e6,
        "payload_parts_mb": {k: v / 1e6 for k, v in payload.items()},
        "runs": {"forward_s": forward, "prompt_to_view_s": view, "click_s": click,
                 "browser_click_s": in_browser},
    }
    del hf
    result["peers"] = (peers(model, ids) if n <= 1024 else
                       "skipped above 1,024 tokens (their HTML grows with n^2 per head)")
    print(f"{model.facts.name}, {n:,} tokens")
    print(f"  bare HF SDPA forward        median {result['forward_s']:.2f} s  {forward}")
    print(f"  prompt change -> explorer   median {result['prompt_to_view_s']:.2f} s  "
          f"= {result['ratio']:.2f}x the forward pass")
    print(f"  click on a head (rerun)     median {result['click_s']:.2f} s")
    print(f"  click in Chromium           {result['browser_click_s']}")
    print(f"  peak RSS above the models   {result['peak_rss_above_model_mb']:.0f} MiB")
    print(f"  one view sends              {result['payload_mb']:.2f} MB "
          + ", ".join(f"{k} {v:.2f}" for k, v in result["payload_parts_mb"].items()))
    print(f"  peers                       {result['peers']}")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
