"""The Circuits page in Chromium on the bundled model: attribution patching runs, its scatter
against exact patching is drawn, the circuit graph is drawn, and a clicked node opens a link to
that head in the explorer."""

import pytest

from tests.e2e.conftest import settle, shoot

pytestmark = pytest.mark.e2e


def chart(page, text: str):
    """The plotly chart whose text includes ``text`` (a title)."""
    return page.locator(".js-plotly-plot", has_text=text)


def open_tab(page, label: str) -> None:
    page.get_by_role("tab", name=label).click()
    settle(page, timeout=300_000)


def test_atp_scatter_and_graph_are_drawn_and_a_node_opens_the_explorer(page, app_url):
    page.goto(f"{app_url}/circuits?model=bundled")
    page.wait_for_selector("h1", timeout=180_000)
    settle(page, timeout=300_000)
    open_tab(page, "Attribution patching (AtP*)")
    scatter = chart(page, "AtP* against exact patching")
    scatter.wait_for(timeout=120_000)
    assert scatter.locator(".scatterlayer .point").count() >= 12  # a point per head
    assert page.get_by_text("Where they disagree most").count() == 1
    assert page.locator('[data-testid="stException"]').count() == 0
    shoot(page, "circuits-atp")

    open_tab(page, "Paths and the circuit graph")
    graph = chart(page, "Circuit graph")
    graph.wait_for(timeout=120_000)
    assert graph.locator(".scatterlayer path.js-line").count() >= 1  # edges drawn
    assert chart(page, "Path effect of each sender").count() == 1
    assert page.locator('[data-testid="stException"]').count() == 0
    shoot(page, "circuits-graph")

    nodes = graph.locator(".scatterlayer .trace").last.locator(".point")
    assert nodes.count() == 12
    nodes.nth(4).scroll_into_view_if_needed()
    box = nodes.nth(4).bounding_box()  # head 1.0, under plotly's drag layer: click its place
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    settle(page)
    link = page.get_by_role("link", name="Open 1.0 in the explorer ↗")
    assert link.count() == 1 and "layer=1&head=0" in link.get_attribute("href")
    assert page.get_by_text("Head 1.0: into it from").count() == 1  # the head's detail
    graph = chart(page, "Circuit graph")
    shades = (
        graph.locator(".scatterlayer .trace")
        .last.locator(".point")
        .evaluate_all("els => els.map(e => getComputedStyle(e).opacity)")
    )
    assert shades and set(shades) == {"1"}  # the click greyed out no node
