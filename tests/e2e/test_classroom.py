"""The Classroom's text size for a projector, measured in Chromium: Large and Larger make the
page's body text, captions and headings larger (computed font sizes), Normal puts them back."""

from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np
import pytest

from tests.e2e.conftest import settle

pytestmark = pytest.mark.e2e

# the computed font size (px) of the first element of each kind in the page's main area
MEASURE = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const size = (sel) => {
    const el = main.querySelector(sel);
    return el ? parseFloat(getComputedStyle(el).fontSize) : null;
  };
  return {
    text: size('[data-testid="stMarkdown"] p'),
    label: size('[data-testid="stWidgetLabel"] p'),
    caption: size('[data-testid="stCaptionContainer"]'),
    title: size('h1'),
    heading: size('h2, h3'),
  };
}"""


def choose_size(page, label: str) -> None:
    page.locator('[data-testid="stSelectbox"]', has_text="Text size").click()
    page.get_by_role("option", name=label).click()
    settle(page)


def test_large_and_larger_text_grow_every_kind_of_text(page, app_url):
    page.goto(f"{app_url}/classroom?model=bundled")
    page.wait_for_selector("h1", timeout=180_000)
    settle(page, timeout=300_000)
    normal = page.evaluate(MEASURE)
    assert all(normal.values()), normal
    choose_size(page, "Large text (projector)")
    large = page.evaluate(MEASURE)
    choose_size(page, "Larger text (back row)")
    larger = page.evaluate(MEASURE)
    for kind, px in normal.items():
        assert large[kind] == pytest.approx(1.25 * px, rel=0.02), (kind, normal, large)
        assert larger[kind] == pytest.approx(1.5 * px, rel=0.02), (kind, normal, larger)
    choose_size(page, "Normal text")
    assert page.evaluate(MEASURE) == normal


def test_a_classroom_link_opens_the_typed_example_and_follows_the_tabs(page, app_url):
    """The link a teacher copies carries the matrices, the mask and the open tab: opened in a
    fresh browser it shows the same numbers; opening another tab puts it in the address bar."""
    q, k, v = np.array([[1.0, 2.0], [3.0, -1.0]]), np.array([[0.5, 1.0], [2.0, 0.0]]), np.eye(2)
    typed = {
        n: "; ".join(", ".join(f"{x:g}" for x in row) for row in m)
        for n, m in (("mq", q), ("mk", k), ("mv", v))
    }
    page.goto(f"{app_url}/classroom?model=bundled&ctab=steps&causal=1&{urlencode(typed)}")
    page.wait_for_selector("h1", timeout=180_000)
    settle(page, timeout=300_000)
    scaled = q @ k.T / np.sqrt(2)  # independent of the page: numpy on the typed numbers
    table = page.locator("table.classroom-matrix", has_text="S / √2").first
    cells = [float(c) for c in table.locator("td").all_inner_texts()]
    np.testing.assert_allclose(np.reshape(cells, (2, 2)), scaled, atol=5e-4)
    assert page.locator("table.classroom-matrix", has_text="masked scores").count() == 1
    page.get_by_role("tab", name="Cost").click()
    settle(page)
    # the address bar is rewritten by the link component once its frame has drawn
    page.wait_for_function("() => location.search.includes('ctab=cost')", timeout=60_000)
    query = dict(parse_qsl(urlsplit(page.url).query))
    assert query["ctab"] == "cost" and query["mq"] == typed["mq"] and query["causal"] == "1"
