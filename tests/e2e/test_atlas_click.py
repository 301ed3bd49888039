"""The head atlas in Chromium: a click on a head's point opens its card.

AppTest sets a chart's selection directly, so it cannot see what the browser does with a click:
Streamlit's chart turns click selection off when the figure's drag mode is lasso or box select,
and then a click reached nobody."""

import re

import pytest

from tests.e2e.conftest import app_server, settle

pytestmark = pytest.mark.e2e

POINT = ".scatterlayer .trace .points path.point"
CARD = re.compile(r"^Head \d+\.\d+$")  # the card's heading, "Head 1.2"


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
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        card = page.get_by_role("heading", name=CARD).first
        card.wait_for(timeout=60_000)
        settle(page)
        assert CARD.match((card.text_content() or "").strip())
        page.close()
