"""The components' own JavaScript in Chromium, held to the Python rules it mirrors.

Each component's code (``ui/widgets/frontend/``) is mounted in a bare page the way Streamlit
mounts it (inside a shadow root, with its CSS) and fed the data Python sends it. What it draws
is compared with an independent Python side: the token strip's shading and titles with
:func:`viz.token_view.token_spans`.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

from models.capture.run import capture
from ui.widgets.components import shaded
from ui.widgets.frontend_code import source
from viz.token_view import token_spans

pytestmark = pytest.mark.e2e

PROMPT = "one two three one two three"

# Mount a component's module as Streamlit does: parentElement is an open shadow root on a host
# of the given width, the component's CSS inside it; trigger values are recorded in order.
MOUNT = """async ({js, css, width}) => {
  const host = document.createElement('div');
  host.style.width = width + 'px';
  document.body.replaceChildren(host);
  const shadow = host.attachShadow({mode: 'open'});
  const style = document.createElement('style');
  style.textContent = css;
  shadow.appendChild(style);
  const module = await import('data:text/javascript;charset=utf-8,' + encodeURIComponent(js));
  window.__sent = [];
  window.__render = (data) => module.default({
    data, parentElement: shadow,
    setTriggerValue: (name, value) => window.__sent.push([name, value]),
  });
}"""


@pytest.fixture
def mount(page):
    """``mount(stem)`` loads ``frontend/<stem>.js`` and ``.css`` into the page and returns
    ``render(data)``, which runs the component with ``data`` as Streamlit would."""

    def load(stem: str, width: int = 900):
        page.evaluate(
            MOUNT, {"js": source(f"{stem}.js"), "css": source(f"{stem}.css"), "width": width}
        )
        return lambda data: page.evaluate("(data) => window.__render(data)", data)

    return load


# --- the token strip's shading -------------------------------------------------------------


def python_spans(tokens, weights, selected, direction) -> list[tuple[str, str, str, str]]:
    """``(class, style, title, text)`` of every span :func:`token_spans` writes."""
    found = re.findall(
        r'<span class="([^"]*)" data-pos="\d+" style="([^"]*)" title="([^"]*)">([^<]*)</span>',
        token_spans(tokens, weights, selected, direction),
    )
    return [tuple(html.unescape(part) for part in span) for span in found]


def drawn_spans(page) -> list[tuple[str, str, str, str]]:
    got = page.locator(".tok").evaluate_all(
        "els => els.map(e => [e.getAttribute('class'), e.getAttribute('style'), e.title,"
        " e.textContent])"
    )
    return [tuple(span) for span in got]


def strip_cases() -> list[tuple[str, list[str], np.ndarray, int | None]]:
    """Weights (float32, NaN masked) that probe the rule's edges: values exactly halfway
    between two printed digits (odd multiples of 1/16), exactly half the darkest weight (the
    white-text threshold) and just past it, nothing positive, one visible token, tiny values."""
    sixteenths = np.arange(1, 16, 2) / 16
    top = np.float32(0.7)
    half = top / np.float32(2)
    return [
        ("halfway", ["a"] * 10, np.r_[1.0, sixteenths, np.nan], 0),
        ("threshold", list("wxyz"), np.r_[top, half, np.nextafter(half, top), 0.1], 3),
        ("nothing positive", list("abc"), np.zeros(3), None),
        ("one visible", list("abcd"), np.r_[np.nan, 0.3, np.nan, np.nan], 1),
        ("tiny", list("abc"), np.r_[1e-7, 4.9996e-4, 5e-4], 2),
        ("markup", ["<b>", "&amp;", '"q"', "it's", " \n"], np.r_[0.2, 0.1, 0.4, 0.3, 0.0], 4),
    ]


@pytest.mark.parametrize("case", strip_cases(), ids=lambda case: case[0])
@pytest.mark.parametrize("direction", ["from", "to"])
def test_the_strip_shades_edge_weights_as_python_does(page, mount, case, direction):
    _, tokens, weights, selected = case
    weights = weights.astype(np.float32)
    render = mount("token_strip")
    render({"shaded": shaded(tokens, weights, selected, direction), "span": None, "anchor": None})
    assert drawn_spans(page) == python_spans(tokens, weights, selected, direction)


def test_the_strip_shades_every_head_of_a_real_prompt_as_python_does(page, mount, bundled):
    """Every head's row for two queries, one after the other on the same spans (the strip is
    restyled in place, never laid out again)."""
    run = capture(bundled, PROMPT)
    tokens = list(run.tokens)
    render = mount("token_strip")
    first = True
    for layer in range(run.facts.n_layers):
        for head in range(run.facts.n_heads):
            for query in (2, run.n_tokens - 1):
                row = run.pattern(layer, head)[query].astype(np.float32)
                row[query + 1 :] = np.nan  # out of the causal query's reach
                render({"shaded": shaded(tokens, row, query, "from"), "span": None})
                if first:
                    page.locator(".tok").evaluate_all("els => els.forEach(e => { e.__kept = 1; })")
                    first = False
                assert drawn_spans(page) == python_spans(tokens, row, query, "from")
    assert page.locator(".tok").evaluate_all("els => els.every(e => e.__kept === 1)")
