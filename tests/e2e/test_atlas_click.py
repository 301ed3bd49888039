"""The head atlas in Chromium: resting the pointer on a head's point shows its picture beside
the pointer, and a click on the point opens its card.

AppTest sets a chart's selection directly, so it cannot see what the browser does with a click:
Streamlit's chart turns click selection off when the figure's drag mode is lasso or box select,
and then a click reached nobody. Nor can it see the hover picture, which the browser draws from
the chart's own hover events."""

import re

import pytest

from tests.e2e.conftest import app_server, settle

pytestmark = pytest.mark.e2e

POINT = ".scatterlayer .trace .points path.point"
CARD = re.compile(r"^Head \d+\.\d+$")  # the card's heading, "Head 1.2"
PICTURE = "#atlas-map-picture"  # the hover picture beside the pointer


def test_a_click_on_a_head_opens_its_card(browser):
    with app_server("atlas-server.log") as (url, _):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{url}/atlas?model=bundled")
        start = page.get_by_role("button", name="Measure every head on")
        start.wait_for(timeout=180_000)
        settle(page)
        start.click()
        page.locator(POINT).first.wait_for(timeout=180_000)
        settle(page)
        assert page.get_by_role("heading", name=CARD).count() == 0  # no card before a click
        point = page.locator(POINT).nth(5)
        point.scroll_into_view_if_needed()
        box = point.bounding_box()
        assert box is not None
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        picture = page.locator(PICTURE)
        assert picture.count() == 0 or not picture.is_visible()
        page.mouse.move(x - 40, y - 40)
        page.mouse.move(x, y, steps=5)  # rest on the point: its picture follows the pointer
        picture.wait_for(state="visible", timeout=10_000)
        head = picture.get_attribute("data-head") or ""
        assert re.fullmatch(r"\d+\.\d+", head)
        src = picture.locator("img").get_attribute("src") or ""
        assert src.startswith("data:image/png;base64,") and f"head {head}:" in picture.inner_text()
        shown = picture.bounding_box()
        assert shown is not None and shown["width"] >= 128 and shown["x"] > x  # beside it
        page.mouse.click(x, y)
        card = page.get_by_role("heading", name=CARD).first
        card.wait_for(timeout=60_000)
        settle(page)
        assert (card.text_content() or "").strip() == f"Head {head}"  # the point pictured
        page.close()
