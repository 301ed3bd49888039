"""The app's real server and Debian's Chromium, as the benchmarks and the browser tests use them.

- :data:`CHROMIUM` and :data:`FLAGS`: the browser (never downloaded) and the flags that keep it
  off the network and quiet;
- :func:`app_server`: ``python -m ui.serve`` (what ``make run`` starts) on a free loopback port,
  yielding its address once its health check answers, stopped on the way out (a test may name
  a module of its own that starts the same server);
- :func:`app_page`: that server with a Chromium page beside it, as the benchmarks that time
  clicks use them;
- :func:`settled_js`: the script a benchmark arms in the page before a click, which times the
  click by the page's own clock until what it shows has settled.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """Wait until the server at ``url`` answers its health check.

    Raises:
        RuntimeError: the server exited. TimeoutError: it did not answer in ``timeout`` s.
    """
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as resp:
                if resp.read().decode().strip() == "ok":
                    return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError("the app did not answer its health check")


@contextlib.contextmanager
def app_server(log: Path, module: str = "ui.serve", **env: str) -> Iterator[tuple[str, int]]:
    """The app's server (``python -m module``) on a free loopback port, its output in ``log``,
    the environment's variables and ``env`` set; yields ``(url, pid)``."""
    port = free_port()
    variables = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **env}
    command = [sys.executable, "-m", module, "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=variables, stdout=out, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, proc)
            yield url, proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextlib.contextmanager
def app_page(log: Path, **env: str) -> Iterator[tuple[str, Any]]:
    """:func:`app_server` (``env`` set, every job waited for in the page) and a Chromium page
    of 1,400 x 1,600 px beside it; yields ``(url, page)``, both closed on the way out."""
    from playwright.sync_api import sync_playwright

    with app_server(log, ATLAS_JOB_WAIT_S="3600", **env) as (base, _), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield base, browser.new_page(viewport={"width": 1400, "height": 1600})
        finally:
            browser.close()


# Every ``.hm canvas`` of the page (the heatmaps the page paints), looked for inside the
# components' shadow roots too; for a ``settled_js`` setup.
CANVASES_JS = """const canvases = (root = document) => [
    ...root.querySelectorAll('.hm canvas'),
    ...[...root.querySelectorAll('*')].flatMap(
      (el) => (el.shadowRoot ? canvases(el.shadowRoot) : [])),
  ];
  const painted = (head) => canvases().filter(
    (c) => (c.getAttribute('aria-label') || '').startsWith('Head ' + head + ':')).length;"""


def settled_js(ready: str, args: str = "title", setup: str = "") -> str:
    """A function for ``page.evaluate(script, argument)``: from the next click event (captured
    first, in the page's own clock) to the first animation frame in which ``ready`` holds and
    the app's run has finished, ``window.__settled`` resolves to the milliseconds it took.

    Args:
        ready: a JavaScript expression over ``args``, ``setup``'s names and ``shows(title)``
            (whether an ``h3`` heading reads ``title``).
        args: the function's parameter (``title``, or a pattern such as ``[head, title]``).
        setup: statements run once when the script is armed.
    """
    return f"""({args}) => {{
  {setup}
  let t0 = null;
  document.addEventListener('click', () => {{ t0 = performance.now(); }},
                            {{capture: true, once: true}});
  const app = document.querySelector('[data-testid=stApp]');
  const shows = (text) => [...document.querySelectorAll('h3')].some(
    (h) => h.textContent.trim() === text);
  window.__settled = new Promise((resolve) => {{
    const tick = () => {{
      if (t0 !== null && ({ready})
          && app.getAttribute('data-test-script-state') === 'notRunning') {{
        resolve(performance.now() - t0);
        return;
      }}
      requestAnimationFrame(tick);
    }};
    requestAnimationFrame(tick);
  }});
}}"""
