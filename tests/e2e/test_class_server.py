"""A class on one server: twelve browser sessions at once on loopback, half of them on heavy work.

Light sessions click through heads of the bundled model while heavy sessions run long SmolLM2
prompts; every light session must keep seeing its own head, and once every session has closed the
server must hand its memory back (resident size within 20 % of what it held before the class).
Click latencies and memory are printed (``-s``) for the record; nothing here is timed against a
threshold.
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from urllib.parse import quote

import pytest

from tests.e2e.conftest import ROOT, app_server, rss_mib, settle, shoot

pytestmark = pytest.mark.e2e

N_LIGHT, N_HEAVY, CLICKS = 6, 6, 4
ENGLISH = (
    "The ferry leaves the harbour at seven in the morning and comes back before dark. "
    "On calm days the crossing takes forty minutes; when the wind rises it can take twice "
    "as long, and the crew hands out blankets to the passengers on the open deck. "
)


@pytest.fixture
def class_server(smollm2):
    """A fresh server that drops idle models and results after 20 s."""
    with app_server(
        "class-server.log", ATLAS_IDLE_S="20", ATLAS_JOB_WAIT_S="1", ATLAS_HEAVY_JOBS="1"
    ) as served:
        yield served


HEADING = re.compile(r"^Head \d+\.\d+$")


def shown_head(page) -> str:
    """The explorer's "Head L.H" heading; on failure, what the page and the server said instead."""
    heading = page.locator("h3", has_text=HEADING).first
    try:
        heading.wait_for(timeout=120_000)
    except Exception as err:  # say what the session showed instead
        shoot(page, "class-server-no-heading")
        text = page.locator("body").inner_text()
        log = (ROOT / "artifacts" / "class-server.log").read_text(errors="replace")
        raise AssertionError(
            f"no head heading; the page showed:\n{text[:3000]}\nserver log (end):\n{log[-3000:]}"
        ) from err
    return heading.inner_text().strip()


def test_twelve_sessions_share_one_server(browser, class_server):
    url, pid = class_server
    warm = browser.new_context(viewport={"width": 1300, "height": 1500}).new_page()
    warm.goto(f"{url}/?model=bundled&prompt={quote('warm up the server')}")
    warm.wait_for_selector("button[data-head]", timeout=180_000)
    settle(warm)
    warm.context.close()
    baseline = rss_mib(pid)
    peak, sampling = [baseline], threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak.append(rss_mib(pid))
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    contexts = [
        browser.new_context(viewport={"width": 1300, "height": 1500})
        for _ in range(N_LIGHT + N_HEAVY)
    ]
    pages = [c.new_page() for c in contexts]
    latencies: list[float] = []
    try:
        for i, page in enumerate(pages[N_LIGHT:]):  # heavy: long prompts on SmolLM2
            prompt = f"Passage {i}. " + ENGLISH * 12
            page.goto(f"{url}/?model=smollm2&prompt={quote(prompt)}", wait_until="commit")
        for i, page in enumerate(pages[:N_LIGHT]):  # light: the bundled model
            page.goto(
                f"{url}/?model=bundled&prompt={quote(f'light session {i}: a b c a b c')}",
                wait_until="commit",
            )
        for i, page in enumerate(pages[:N_LIGHT]):
            page.wait_for_selector("button[data-head]", timeout=240_000)
            settle(page)
            for c in range(CLICKS):
                head = f"{(i + c) % 3}.{(i + 2 * c) % 4}"
                if shown_head(page) == f"Head {head}":
                    continue
                start = time.perf_counter()
                page.locator(f"button[data-head='{head}']").click()
                page.wait_for_function(
                    f"() => [...document.querySelectorAll('h3')].some("
                    f"h => h.textContent.trim() === 'Head {head}')",
                    timeout=120_000,
                )
                latencies.append(time.perf_counter() - start)
                settle(page)
                assert shown_head(page) == f"Head {head}"
            assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        for context in contexts:
            context.close()
    after = baseline
    # The janitor sweeps every 5 s and drops entries idle for 20 s; a closed browser's session
    # itself goes after Streamlit's disconnectedSessionTTL (120 s), then the next idle sweep
    # collects what it held.
    for _ in range(100):
        time.sleep(3)
        after = rss_mib(pid)
        if after <= 1.2 * baseline:
            break
    sampling.set()
    sampler.join(5)
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(
        f"\n[class server] {N_LIGHT} light + {N_HEAVY} heavy sessions; light clicks: "
        f"n={len(latencies)} p50={statistics.median(latencies):.2f} s p95={p95:.2f} s; "
        f"RSS baseline {baseline:.0f} MiB, peak {max(peak):.0f} MiB, after close "
        f"{after:.0f} MiB"
    )
    assert latencies and after <= 1.2 * baseline
