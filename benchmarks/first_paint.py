"""How soon each page shows something after the server answers, as a visitor's browser sees it.

Starts the app's server (``python -m ui.serve``, what ``make run`` starts) on a free loopback
port, waits for its health check, then opens every page in Debian's Chromium, each in a fresh
browser context (a new session), and measures from the navigation's start:

- ``paint_s``: the browser's first contentful paint (its own Performance timeline: the app's
  shell, before any script run);
- ``menu_s``: the sidebar's page menu drawn (the first thing the app's script run draws);
- ``title_s``: the page's own title drawn (the page has started; anything slow comes after it,
  behind a spinner or a start button);
- ``settled_s``: the script run finished (every costly view is asked for, not run, so this is
  the page's whole arrival).

The first page opened is the server's first script run (imports, and loading the model the link
names); the others find the model loaded. Between two pages the benchmark waits ``--pause``
seconds, so that work a page left running in the background (the explorer's marks, say) does not
slow the next page's arrival. Prints measured numbers and never fails on time.

    python -m benchmarks.first_paint                    # the bundled model, every page
    python -m benchmarks.first_paint --model smollm2 --json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.browser import CHROMIUM, FLAGS, app_server
from benchmarks.machine import describe

ROOT = Path(__file__).resolve().parents[1]
# Every page's address and its title, as app.py and pages/ name them.
PAGES = {
    "": "Explorer",
    "heads": "Head finder",
    "atlas": "Head atlas",
    "circuits": "Circuits",
    "generate": "Generate",
    "scaling": "Scaling sweep",
    "kernel": "Kernel check",
    "classroom": "Classroom: attention, step by step",
}
MENU = '[data-testid="stSidebar"] a'
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
TARGET_S = 2.0
FIRST_PAINT = """() => {
  const [entry] = performance.getEntriesByName('first-contentful-paint');
  return entry ? entry.startTime : NaN;
}"""


@dataclasses.dataclass(frozen=True)
class Arrival:
    """Seconds from navigating to a page until its menu, its title and its finished run."""

    page: str
    first_run: bool
    paint_s: float
    menu_s: float
    title_s: float
    settled_s: float


def open_page(browser, url: str, title: str, timeout_s: float) -> tuple[float, float, float, float]:
    """Seconds from navigating to ``url`` until the first paint, the menu, the title and the
    finished run."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    timeout_ms = timeout_s * 1000
    try:
        start = time.perf_counter()
        page.goto(url, wait_until="commit")
        page.wait_for_selector(MENU, timeout=timeout_ms)
        menu = time.perf_counter() - start
        page.get_by_role("heading", name=title).first.wait_for(timeout=timeout_ms)
        shown = time.perf_counter() - start
        page.wait_for_timeout(300)  # the run the navigation started is under way
        page.wait_for_selector(IDLE, timeout=timeout_ms)
        settled = time.perf_counter() - start
        paint = page.evaluate(FIRST_PAINT) / 1000
    finally:
        context.close()
    return paint, menu, shown, settled


def measure(model: str, timeout_s: float, pause_s: float) -> list[Arrival]:
    from playwright.sync_api import sync_playwright

    log = Path(tempfile.gettempdir()) / "first-paint-server.log"
    rows: list[Arrival] = []
    with app_server(log) as (url, _), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        query = "" if model == "bundled" else f"?model={model}"
        for i, (path, title) in enumerate(PAGES.items()):
            time.sleep(pause_s if i else 0.0)
            times = open_page(browser, f"{url}/{path}{query}", title, timeout_s)
            rows.append(Arrival(title, i == 0, *times))
        browser.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="bundled", help="bundled, smollm2, minilm")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per page at most")
    parser.add_argument("--pause", type=float, default=5.0, help="seconds between two pages")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit("Debian's chromium is not installed (tests/e2e/setup_browser.sh installs it)")
    rows = measure(args.model, args.timeout, args.pause)
    machine = describe(rates=False)
    print(f"machine: {machine}")
    print(f"model: {args.model}; seconds from navigation (the first row: the server's first run)")
    print(f"  {'page':<36} {'paint':>6} {'menu':>6} {'title':>6} {'settled':>8}")
    for row in rows:
        name = f"{row.page}{' (first run)' if row.first_run else ''}"
        print(
            f"  {name:<36} {row.paint_s:>6.2f} {row.menu_s:>6.2f} {row.title_s:>6.2f}"
            f" {row.settled_s:>8.2f}"
        )
    paint = max(row.paint_s for row in rows)
    title = max((row.title_s for row in rows if not row.first_run), default=float("nan"))
    print(f"  slowest first paint: {paint:.2f} s (target {TARGET_S:.0f} s)")
    print(f"  slowest title after the first run: {title:.2f} s")
    if args.json:
        pages = [dataclasses.asdict(row) for row in rows]
        print(json.dumps({"model": args.model, "machine": machine, "pages": pages}))


if __name__ == "__main__":
    main()
