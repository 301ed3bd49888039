"""The Classroom's text size for a projector, measured in Chromium: Large and Larger make the
page's body text, captions and headings larger (computed font sizes), Normal puts them back."""

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
