"""A real app server and Debian's Chromium driven by Playwright.

The server is ``python -m ui.serve`` (what ``make run`` starts) on a free localhost port, started
once per session.
Screenshots land in ``artifacts/screenshots/`` (git-ignored).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest

from benchmarks import browser as browser_tools
from benchmarks.browser import CHROMIUM, FLAGS
from ui.widgets.frontend_code import source

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"

pytestmark = pytest.mark.e2e


@contextlib.contextmanager
def app_server(log_name: str, module: str = "ui.serve", **env: str):
    """The app's server (``python -m ui.serve``, or ``module`` that starts it) on a free
    loopback port, its output in ``artifacts/<log_name>``; yields ``(url, pid)``."""
    with browser_tools.app_server(ROOT / "artifacts" / log_name, module, **env) as found:
        yield found


@pytest.fixture(scope="session")
def app_url():
    with app_server("e2e-server.log") as (url, _):
        yield url


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (tests/e2e/setup_browser.sh installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 2000})
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    context.close()


def settle(page, timeout: float = 120_000) -> None:
    """Wait until the script run triggered by the last action has finished."""
    page.wait_for_timeout(400)
    page.wait_for_selector(
        '[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout
    )
    page.wait_for_timeout(600)


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB (NaN once it has gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:  # the server has gone
        pass
    return float("nan")


def shoot(page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


HEATMAP = ".hm canvas[aria-label]"  # the explorer's detail heatmap, painted
CHART = f".js-plotly-plot, {HEATMAP}"  # any chart a page drew


def detail_heatmap(page) -> np.ndarray:
    """The explorer's detail heatmap as the page's canvas holds it (``query key`` weights after
    decoding, NaN where masked)."""
    got = page.locator(".hm").evaluate(
        "(el) => ({cols: el.__shown.n_cols, values: Array.from(el.__shown.values,"
        " (v) => (Number.isNaN(v) ? null : v))})"
    )
    values = np.array([np.nan if v is None else v for v in got["values"]], dtype=float)
    return values.reshape(-1, got["cols"])


# Mount a component's module as Streamlit does: parentElement is an open shadow root on a host
# of the given width, the component's CSS inside it; trigger values are recorded in order.
MOUNT = """async ({js, css, width}) => {
  const host = document.createElement('div');
  host.style.width = width + 'px';
  document.body.replaceChildren(host);
  const shadow = host.attachShadow({mode: 'open'});
  const style = document.createElement('style');
  style.textContent = css;
  shadow.appendChild(style);
  const module = await import('data:text/javascript;charset=utf-8,' + encodeURIComponent(js));
  window.__sent = [];
  window.__render = (data) => module.default({
    data, parentElement: shadow,
    setTriggerValue: (name, value) => window.__sent.push([name, value]),
  });
}"""


@pytest.fixture
def mount(page):
    """``mount(stem)`` loads ``frontend/<stem>.js`` and ``.css`` into the page and returns
    ``render(data)``, which runs the component with ``data`` as Streamlit would."""

    def load(stem: str, width: int = 900):
        page.evaluate(
            MOUNT, {"js": source(f"{stem}.js"), "css": source(f"{stem}.css"), "width": width}
        )
        return lambda data: page.evaluate("(data) => window.__render(data)", data)

    return load
