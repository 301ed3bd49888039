"""Compare mode and spans in Chromium: a link opens compare mode with the divergence grid and A,
B and A − B painted; a click on the grid opens that head; a shift-click or a drag in the token
strip selects a span."""

import re
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.e2e.conftest import settle, shoot
from tests.e2e.test_html_export import open_blocked

pytestmark = pytest.mark.e2e

A = "the cat sat on the mat because it was warm"
B = "the dog sat on the mat because it was warm"
DIVERGENCE = ".grid[data-kind='divergence'] button[data-head]"


def link(app_url: str, **query) -> str:
    return f"{app_url}/?{urlencode({'model': 'bundled', **query})}"


def test_a_link_opens_compare_mode_with_the_grid_and_the_difference(page, app_url):
    page.goto(link(app_url, prompt=A, mode="compare", b=B, layer=0, head=1))
    page.wait_for_selector(DIVERGENCE, timeout=180_000)
    settle(page)
    assert page.locator(DIVERGENCE).count() == 12
    assert page.locator(f"{DIVERGENCE}.sel").get_attribute("data-head") == "0.1"
    # A, B and A − B painted on the page's canvas, one per column of equal width
    canvases = page.locator(".hm canvas[aria-label^='Head 0.1: ']")
    canvases.nth(2).wait_for(timeout=60_000)
    labels = canvases.evaluate_all("els => els.map(e => e.getAttribute('aria-label'))")
    assert labels == ["Head 0.1: A", "Head 0.1: B", "Head 0.1: A − B"]
    widths = canvases.evaluate_all(
        "els => els.map(e => Math.round(e.getBoundingClientRect().width))"
    )
    assert widths[0] == widths[1] == widths[2] > 100
    assert page.locator(".js-plotly-plot .heatmaplayer").count() == 0  # no plotly heatmap left
    assert page.locator('[data-testid="stException"]').count() == 0
    shoot(page, "explorer-compare")

    page.locator(f"{DIVERGENCE}[data-head='2.2']").click()
    settle(page)
    page.locator("h3", has_text="Head 2.2: A, B and A − B").wait_for(timeout=60_000)
    page.wait_for_function("() => location.search.includes('head=2')", timeout=10_000)
    query = parse_qs(urlsplit(page.url).query)
    assert query["mode"] == ["compare"] and query["b"] == [B] and query["head"] == ["2"]


def test_the_downloaded_view_opens_with_the_network_off(page, app_url, browser, tmp_path):
    page.goto(link(app_url, prompt=A, mode="compare", b=B, layer=2, head=2))
    page.wait_for_selector(DIVERGENCE, timeout=180_000)
    settle(page)
    with page.expect_download(timeout=120_000) as download:
        page.get_by_role("button", name=re.compile("Download this view as HTML")).click()
    path = tmp_path / "view.html"
    download.value.save_as(path)
    drawn, attempted, reached, _, _ = open_blocked(
        browser,
        path.as_uri(),
        "() => [document.querySelectorAll('.js-plotly-plot .heatmaplayer image').length,"
        " document.querySelectorAll('table.grid img').length, document.body.innerText]",
        ready=".js-plotly-plot .heatmaplayer image",
    )
    assert drawn[0] == 1 and drawn[1] == 12 and "A − B" in drawn[2]
    assert attempted == [] and reached == []


def test_shift_click_and_drag_select_a_span(page, app_url):
    page.goto(link(app_url, prompt="one two three four five six", layer=2, head=0))
    page.wait_for_selector(".tok", timeout=180_000)
    settle(page)
    tokens = page.locator(".tok")
    tokens.nth(2).click()
    settle(page)
    tokens.nth(5).click(modifiers=["Shift"])
    settle(page)
    spans = page.locator(".tok.span").evaluate_all("els => els.map(e => e.dataset.pos)")
    assert spans == ["2", "3", "4", "5"]
    assert page.get_by_text("Attention from a span is the mean").count() == 1
    tokens.nth(1).hover()
    page.mouse.down()
    tokens.nth(2).hover()
    tokens.nth(3).hover()
    page.mouse.up()
    settle(page)
    spans = page.locator(".tok.span").evaluate_all("els => els.map(e => e.dataset.pos)")
    assert spans == ["1", "2", "3"]
