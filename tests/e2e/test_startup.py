"""A fresh server, opened as a newcomer would: the sidebar shows the app's own page menu from the
first moment (never a listing of the pages/ folder), and addresses that are not pages lead to
the explorer rather than to a blank page."""

from __future__ import annotations

import time
import urllib.request

import pytest

from tests.e2e.conftest import app_server, settle

pytestmark = pytest.mark.e2e

MENU = ["Explorer", "Head finder", "Circuits", "Scaling sweep", "Kernel check", "Classroom"]
SIDEBAR_LINKS = """() => [...document.querySelectorAll('[data-testid="stSidebar"] a')]
    .map((a) => a.textContent.trim()).filter((t) => t)"""


# the same test as has_menu, in the page: every menu title ends one of the sidebar's links
MENU_SHOWN = f"""() => {{
  const links = ({SIDEBAR_LINKS})();
  return {list(MENU)!r}.every((name) => links.some((link) => link.endsWith(name)));
}}"""


def fetch(url: str) -> tuple[str, str]:
    """The content type and body of ``url``."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.headers.get("Content-Type", ""), resp.read().decode("utf-8", "replace")


def test_streamlits_metrics_are_not_served_to_visitors():
    """Without the route, the address answers like any unknown path: the app's HTML shell."""
    with app_server("e2e-metrics.log") as (url, _):
        kind, body = fetch(f"{url}/_stcore/metrics")
        assert kind.startswith("text/html") and "# TYPE" not in body
        assert (kind, body) == fetch(f"{url}/_stcore/no-such-route")


def has_menu(links: list[str]) -> bool:
    """Every page of the app's menu is a link (each link's text is its icon's name + title)."""
    return all(any(link.endswith(name) for link in links) for name in MENU)


def test_the_sidebar_never_lists_the_pages_folder_and_stray_paths_lead_home(browser):
    with app_server("e2e-startup.log") as (url, _):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)  # at once: the server's first script run has not happened yet
        seen: list[list[str]] = []
        deadline = time.time() + 60
        while time.time() < deadline:
            links = page.evaluate(SIDEBAR_LINKS)
            if links:
                seen.append(links)
            if has_menu(links):
                break
            page.wait_for_timeout(100)
        assert seen and has_menu(seen[-1]), seen[-1:]
        raw = {"app", "explorer", "heads", "circuits", "scaling", "kernel", "classroom"}
        assert not [links for links in seen if raw & set(links)], seen
        for stray in ("heads_prune", "explorer_views", "nosuchpage"):
            page.goto(f"{url}/{stray}")
            settle(page)
            assert page.get_by_role("heading", name="Explorer").count() >= 1, stray
            page.wait_for_function(MENU_SHOWN, timeout=120_000)  # the sidebar draws after
            assert has_menu(page.evaluate(SIDEBAR_LINKS)), stray
        page.close()
