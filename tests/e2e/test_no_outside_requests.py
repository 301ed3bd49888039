"""Everything the app shows comes from its own server: every page loads with every request to
any other host blocked, and none is even attempted (a classroom behind a firewall, or a visitor
who blocks trackers, sees no failed request)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import settle

pytestmark = pytest.mark.e2e

PAGES = {
    "": "Explorer",
    "heads": "Head finder",
    "circuits": "Circuits",
    "generate": "Generate",
    "scaling": "Scaling sweep",
    "kernel": "Kernel check",
    "classroom": "Classroom",
}
IN_PAGE = ("data", "blob")  # schemes the browser answers itself, without a request


def is_outside(url: str, server: str) -> bool:
    """Whether fetching ``url`` would reach a host other than ``server`` (``http://host:port``)."""
    parts = urlsplit(url)
    return parts.scheme not in IN_PAGE and parts.netloc != urlsplit(server).netloc


def test_the_outside_check_tells_the_server_from_other_hosts():
    server = "http://127.0.0.1:8501"
    assert not is_outside("http://127.0.0.1:8501/static/js/index.js", server)
    assert not is_outside("ws://127.0.0.1:8501/_stcore/stream", server)
    assert not is_outside("data:image/svg+xml;base64,PHN2Zz4=", server)
    assert is_outside("https://fonts.gstatic.com/s/i/visibility/24px.svg", server)
    assert is_outside("http://127.0.0.1:8502/", server)
    assert is_outside("http://localhost:8501/", server)


def test_no_page_asks_anything_of_another_host(browser, app_url):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    attempted: list[str] = []
    served: list[str] = []

    def only_the_server(route) -> None:
        url = route.request.url
        if is_outside(url, app_url):
            attempted.append(url)
            route.abort("blockedbyclient")
        else:
            served.append(url)
            route.continue_()

    context.route("**/*", only_the_server)
    page = context.new_page()
    page.on("websocket", lambda ws: attempted.append(ws.url) if is_outside(ws.url, app_url) else 0)
    by_page = {}
    try:
        for path, heading in PAGES.items():
            page.goto(f"{app_url}/{path}?model=bundled")
            page.wait_for_selector("h1", timeout=180_000)
            settle(page, timeout=300_000)
            assert page.locator("h1", has_text=heading).count() >= 1, path
            by_page[path or "explorer"] = list(attempted)
            attempted.clear()
    finally:
        context.close()
    assert served  # the blocking route saw the page's own requests
    assert by_page == {path or "explorer": [] for path in PAGES}
