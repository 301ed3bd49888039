"""The components' own JavaScript in Chromium, held to the Python rules it mirrors.

Each component's code (``ui/widgets/frontend/``) is mounted in a bare page the way Streamlit
mounts it (inside a shadow root, with its CSS) and fed the data Python sends it. What it draws
is compared with an independent Python side: the token strip's shading and titles with
:func:`viz.token_view.token_spans`, the canvas heatmap's hover readout with the captured
weights, and its clicks with the cell under the pointer. The last test does the same on the
running app's explorer.
"""

from __future__ import annotations

import html
import re
from decimal import Decimal
from urllib.parse import quote

import numpy as np
import pytest
import torch
from PIL import Image

from models.capture.run import capture
from models.model.spec import BUNDLED_DIR
from tests.circuits.conftest import reference
from tests.e2e.conftest import HEATMAP, settle
from ui.widgets.components import shaded
from viz.heatmap import canvas_data, heatmap_data
from viz.token_view import token_spans

pytestmark = pytest.mark.e2e

PROMPT = "one two three one two three"


def sent(page) -> list:
    return page.evaluate("() => window.__sent")


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


# --- the canvas heatmap: hover readout and click -------------------------------------------


def cell_point(page, row: int, col: int) -> tuple[float, float]:
    """The page coordinates of the centre of cell ``(row, col)`` of the painted heatmap."""
    canvas = page.locator(".hm canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    plot = page.locator(".hm").evaluate("el => el.__shown.plot")
    return (
        box["x"] + plot["left"] + (col + 0.5) * plot["cw"],
        box["y"] + plot["top"] + (row + 0.5) * plot["ch"],
    )


def readout(page, row: int, col: int) -> str | None:
    """The hover readout over cell ``(row, col)``, or None when none is shown."""
    page.mouse.move(*cell_point(page, row, col))
    return page.locator(".hm .hmtip").evaluate(
        "el => el.style.display === 'block' ? el.textContent : null"
    )


def assert_reads(text: str | None, weight: float, row_label: str, col_label: str) -> None:
    """``text`` names the cell and shows ``weight`` rounded to the digits it prints."""
    if np.isnan(weight):
        assert text is None
        return
    assert text is not None
    query, key, value = text.split("\n")
    assert (query, key) == (f"query {row_label}", f"key {col_label}")
    name, number = value.rsplit(" ", 1)
    assert name == "weight"
    shown = Decimal(number)
    last_digit = Decimal(1).scaleb(shown.as_tuple().exponent)
    assert abs(shown - Decimal(float(weight))) <= last_digit / 2, (text, weight)


def window_of_head(bundled, rows: slice, cols: list[int], pinned: int):
    """A window of head 1.2's pattern on :data:`PROMPT`, its weights (``query key``, NaN
    where causally masked, computed here from the capture) and its canvas data."""
    run = capture(bundled, PROMPT)
    whole = run.pattern(1, 2).astype(np.float64)
    whole[np.triu_indices(run.n_tokens, 1)] = np.nan
    weights = whole[rows][:, cols]
    labels = run.labels()
    data = heatmap_data(
        run.pattern(1, 2)[rows][:, cols],
        labels,
        causal=True,
        rows=rows,
        cols=cols,
        pinned=pinned,
        selected=rows.start,
    )
    row_labels = labels[rows]
    col_labels = [labels[c] for c in cols]
    return weights, row_labels, col_labels, canvas_data(data)


@pytest.mark.parametrize(
    "rows, cols, pinned",
    [(slice(0, 7), list(range(7)), 0), (slice(3, 7), [0, 4, 5, 6], 1)],
    ids=["whole", "window with a pinned key"],
)
def test_the_heatmap_reads_out_the_weight_under_the_pointer(
    page, mount, bundled, rows, cols, pinned
):
    weights, row_labels, col_labels, data = window_of_head(bundled, rows, cols, pinned)
    render = mount("heatmap")
    render({**data, "file_name": "head_1_2", "label": "Head 1.2", "clickable": False})
    for r in range(len(row_labels)):
        for c in range(len(col_labels)):
            assert_reads(readout(page, r, c), weights[r, c], row_labels[r], col_labels[c])


def test_a_click_on_the_heatmap_reports_its_query_and_key(page, mount, bundled):
    rows, cols = slice(3, 7), [0, 4, 5, 6]
    *_, data = window_of_head(bundled, rows, cols, 1)
    render = mount("heatmap")
    render({**data, "file_name": "head_1_2", "label": "Head 1.2", "clickable": True})
    cells = [(0, 0), (3, 3), (1, 2), (0, 3)]  # (0, 3) is masked: still a cell of the window
    for r, c in cells:
        page.mouse.click(*cell_point(page, r, c))
    assert sent(page) == [["clicked", {"query": r, "key": c}] for r, c in cells]
    box = page.locator(".hm canvas").bounding_box()
    plot = page.locator(".hm").evaluate("el => el.__shown.plot")
    page.mouse.click(box["x"] + plot["left"] - 10, cell_point(page, 0, 0)[1])  # a row label
    assert len(sent(page)) == len(cells)


def test_a_heatmap_without_a_listener_sends_nothing_on_click(page, mount, bundled):
    *_, data = window_of_head(bundled, slice(0, 7), list(range(7)), 0)
    render = mount("heatmap")
    render({**data, "file_name": "head_1_2", "label": "Head 1.2", "clickable": False})
    page.mouse.click(*cell_point(page, 4, 2))
    assert sent(page) == []


def test_the_explorers_heatmap_reads_out_the_captured_weights(page, app_url, bundled):
    """The running app: the readout over every cell of head 1.2 is the captured weight."""
    page.goto(f"{app_url}/?model=bundled&prompt={quote(PROMPT)}&layer=1&head=2")
    page.wait_for_selector(HEATMAP, timeout=180_000)
    settle(page)
    run = capture(bundled, PROMPT)
    weights = run.pattern(1, 2).astype(np.float64)
    weights[np.triu_indices(run.n_tokens, 1)] = np.nan
    labels = run.labels()
    for r in range(run.n_tokens):
        for c in range(run.n_tokens):
            assert_reads(readout(page, r, c), weights[r, c], labels[r], labels[c])


def test_a_click_on_the_explorers_heatmap_explains_that_cell(page, app_url, bundled):
    """The running app: a click on cell (query 5, key 2) of head 1.2 opens Why here? on that
    cell, with the model's own logit of it."""
    page.goto(f"{app_url}/?model=bundled&prompt={quote(PROMPT)}&layer=1&head=2")
    page.wait_for_selector(HEATMAP, timeout=180_000)
    settle(page)
    page.mouse.click(*cell_point(page, 5, 2))
    settle(page)
    page.get_by_text("Score (before the softmax)").wait_for(timeout=180_000)
    said = page.inner_text('[data-testid="stExpander"]')
    assert "Query 5" in said
    ref = reference(BUNDLED_DIR, "gpt2")
    logit = float(ref.raw(ref.run(torch.tensor([capture(bundled, PROMPT).token_ids])), 1, 2)[5, 2])
    found = re.search(r"Score \(before the softmax\): ([-+]\d+\.\d+)", said)
    assert found and abs(float(found.group(1)) - logit) <= 1e-4 + 1e-5 * abs(logit)


def test_the_saved_png_keeps_the_colour_bars_title(page, mount, bundled):
    """The PNG is painted at twice the screen's scale: the colour bar's title (turned on its
    side, centred at ``barTitle``) is drawn in full, with white between it and the edge."""
    *_, data = window_of_head(bundled, slice(0, 7), list(range(7)), 0)
    render = mount("heatmap")
    render(
        {
            **data,
            "value_name": "value-weighted weight",
            "file_name": "head_1_2",
            "label": "Head 1.2",
            "clickable": False,
        }
    )
    plot = page.locator(".hm").evaluate("el => el.__shown.plot")
    with page.expect_download() as saved:
        page.locator(".hmsave").click()
    picture = np.asarray(Image.open(saved.value.path()).convert("L"), dtype=np.float64)
    top, bottom = round(2 * plot["top"]), picture.shape[0] - 2 * 30
    ink = np.flatnonzero((picture[top:bottom] < 160).any(axis=0))  # columns with dark text
    assert ink.max() <= picture.shape[1] - 1 - 2 * 4  # 4 px of white to the edge
    # the title is the last run of dark columns, as wide as an 11 px line of text
    gaps = np.flatnonzero(np.diff(ink) > 1)
    start = ink[gaps[-1] + 1]
    assert 2 * 7 <= ink.max() - start + 1 <= 2 * 14
    assert start > 2 * (plot["left"] + 14) + len(data["cols"]) * 2 * plot["cw"]


# --- the head grid ---------------------------------------------------------------------------


def test_the_grids_head_numbers_hide_the_layers_scrolled_under_them(page, mount):
    """Scrolled down, every point of the sticky row of head numbers shows the label, not a
    picture of a layer that went under it."""
    n_layers, n_heads = 30, 9
    red = (
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4"
        "z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
    )
    cells = [{"id": f"{i // n_heads}.{i % n_heads}", "src": red} for i in range(n_layers * n_heads)]
    mount("head_grid")({"cells": cells, "n_heads": n_heads, "selected": "0.0", "cell": 36})
    page.evaluate("() => { document.body.firstElementChild.shadowRoot"
                  ".querySelector('.gridbox').scrollTop = 400; }")  # fmt: skip
    page.wait_for_timeout(100)
    covered = page.evaluate(
        """() => {
          const root = document.body.firstElementChild.shadowRoot;
          const labels = [...root.querySelectorAll('.lab.top')];
          const style = getComputedStyle(labels[1]);
          const hits = [];
          for (const label of labels) {
            const r = label.getBoundingClientRect();
            for (const fx of [0.1, 0.5, 0.9]) {
              for (const fy of [0.2, 0.5, 0.8]) {
                const hit = root.elementFromPoint(r.left + fx * r.width, r.top + fy * r.height);
                hits.push(hit === label || label.contains(hit));
              }
            }
          }
          return {opacity: style.opacity, background: style.backgroundColor, hits};
        }"""
    )
    assert covered["opacity"] == "1"
    assert not covered["background"].startswith("rgba("), covered["background"]  # opaque
    assert all(covered["hits"]), covered["hits"]


def test_the_grid_marks_each_layers_kind_under_its_number(page, mount):
    """A model whose layers differ: each layer's label holds its number and its mark, and its
    tooltip says what the layer computes; the marks fit beside the pictures."""
    pixel = (
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4"
        "z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
    )
    layers = [
        {"mark": "W4096", "title": "layer 0: sliding window 4,096, learned sinks"},
        {"mark": "G", "title": "layer 1: global, learned sinks"},
    ]
    cells = [{"id": f"{i // 4}.{i % 4}", "src": pixel} for i in range(8)]
    mount("head_grid")({"cells": cells, "n_heads": 4, "selected": "0.0", "cell": 36,
                        "layers": layers})  # fmt: skip
    rows = page.evaluate(
        """() => [...document.body.firstElementChild.shadowRoot
                    .querySelectorAll('.lab:not(.top)')].map((el) => {
              const mark = el.querySelector('.kind'), box = el.getBoundingClientRect();
              const inner = mark.getBoundingClientRect();
              return [el.firstChild.textContent, mark.textContent, el.title,
                      inner.right <= box.right + 0.5 && inner.left >= box.left - 0.5];
            })"""
    )
    assert rows == [
        ["0", "W4096", "layer 0: sliding window 4,096, learned sinks", True],
        ["1", "G", "layer 1: global, learned sinks", True],
    ]


def test_a_learned_sink_is_an_item_before_the_first_token(page, mount):
    """A head with a learned sink: the strip's first item is "sink", on the first token's line,
    shaded by the tokens' rule, not clickable; a strip without one has no such item."""
    tokens, weights = ["a", "b", "c"], np.array([0.2, 0.1, 0.3], dtype=np.float32)
    render = mount("token_strip")
    render({"shaded": shaded(tokens, weights, 2, "from", sink=0.4), "span": None, "anchor": None})
    found = page.evaluate(
        """() => {
          const root = document.body.firstElementChild.shadowRoot.querySelector('.toks');
          const first = root.firstElementChild, tok = root.querySelector('.tok');
          return [first.className, first.textContent, first.title, first.getAttribute('style'),
                  Math.abs(first.getBoundingClientRect().top - tok.getBoundingClientRect().top)];
        }"""
    )
    assert found[:3] == ["toksink", "sink", "learned sink (no token): attention from the "
                         "selected token 0.400"]  # fmt: skip
    assert found[3] == "background:rgba(8, 81, 156, 1.000);color:white;"  # 0.4 over top 0.3
    assert found[4] < 6  # the same line as the first token
    render({"shaded": shaded(tokens, weights, 2, "from"), "span": None, "anchor": None})
    assert page.locator(".toksink").count() == 0
