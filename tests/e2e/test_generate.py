"""The Generate page in Chromium: the bundled model's text streams into the progress panel while
it is written, then every token and the step figure are drawn.

The bundled model writes its tokens in about a tenth of a second on a quiet machine, faster than
the panel is redrawn (every 0.3 s), and its 128-token context leaves no room for a longer text.
So the server (:mod:`tests.e2e.held_serve`) holds the work at its first streamed words until the
page has shown them: the panel is seen while the model is still writing, on any machine."""

import re
from urllib.parse import quote

import pytest

from tests.e2e.conftest import app_server, settle, shoot

pytestmark = pytest.mark.e2e

PROMPT = "class Counter:\n    def __init__(self):\n"
N_NEW = 110  # with the 14-token prompt, near the bundled model's 128-token context


WATCH_JS = """() => {
  window.__streamed = [];
  const look = () => {
    const panel = document.querySelector('[data-testid="stProgress"]');
    const code = document.querySelector('[data-testid="stCode"]');
    const text = panel && code ? code.textContent : "";
    if (text && !window.__streamed.includes(text)) window.__streamed.push(text);
  };
  new MutationObserver(look).observe(document.body, {
    subtree: true, childList: true, characterData: true,
  });
}"""


def streamed_texts(page, timeout_s: float = 180) -> list[str]:
    """Every text the progress panel showed while the generation ran, until it finished:
    recorded in the page by a MutationObserver on every change (no polling gap to miss a
    short-lived panel), read once the written tokens are drawn."""
    page.locator(".tok").first.wait_for(timeout=timeout_s * 1000)
    return page.evaluate("() => window.__streamed")


def test_the_text_streams_onto_the_page_and_the_step_is_drawn(browser, tmp_path):
    release = tmp_path / "release"  # the held generation goes on once this file exists
    # No wait before the panel: this server shows every job's progress at once.
    with app_server(
        "generate-server.log",
        "tests.e2e.held_serve",
        ATLAS_JOB_WAIT_S="0",
        ATLAS_E2E_RELEASE=str(release),
    ) as (url, _):
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{url}/generate?model=bundled&prompt={quote(PROMPT)}")
        page.get_by_text("Press Generate").wait_for(timeout=180_000)  # the model is loaded
        settle(page)
        box = page.get_by_label("New tokens (at most)")
        box.fill(str(N_NEW))
        box.press("Enter")
        settle(page)
        page.evaluate(WATCH_JS)
        priced = re.compile(rf"^Generate \(up to {N_NEW} tokens, about")
        go = page.get_by_role("button", name=priced)
        go.click()  # priced with the new setting
        try:  # the model waits at its first words until the panel has shown them
            page.wait_for_function("() => window.__streamed.length > 0", timeout=180_000)
        finally:
            release.touch()
        seen = streamed_texts(page)
        settle(page)
        assert seen, "nothing was streamed while the model wrote"
        written = page.locator('[data-testid="stExpander"]', has_text="The written text")
        final = written.locator('[data-testid="stCode"]').first.text_content() or ""
        assert all(final.startswith(text) for text in seen)
        assert len(seen[0]) < len(final)  # the panel showed part of the text before the end
        assert page.locator(".tok[title^='step ']").count() == N_NEW
        plots = page.locator(".js-plotly-plot", has_text="every head's attention row")
        assert plots.count() == 1
        assert page.locator('[data-testid="stException"]').count() == 0
        shoot(page, "generate")
        page.close()
