"""The self-contained HTML export: escaping, no external reference, size at 2,048 tokens."""

import re
from dataclasses import replace

import numpy as np
import pytest

from viz.heatmap import head_heatmap
from viz.html_export import (
    MAX_HEATMAP_CELLS,
    PROMPT_CHARS,
    Caption,
    ExportTooLarge,
    Strip,
    export_size,
    png_uri,
    view_html,
)
from viz.thumbnails import pooled_png

PAYLOAD = "<script>alert(1)</script>"
N = 2048


def synthetic(n_tokens: int, window: int, layers: int = 30, heads: int = 9, prompt: str = "p"):
    rng = np.random.default_rng(1)
    grid = [
        [pooled_png(np.tril(rng.random((64, 64))).astype(np.float32)) for _ in range(heads)]
        for _ in range(layers)
    ]
    labels = [f"({i}) w{i}" for i in range(n_tokens)]
    rows = slice(n_tokens // 2, n_tokens // 2 + window)
    fig = head_heatmap(
        rng.dirichlet(np.ones(window), size=window).astype(np.float32),
        labels,
        causal=True,
        title="head 3.1",
        rows=rows,
        cols=rows,
    )
    tokens = [f"w{i}" for i in range(n_tokens)]
    caption = Caption(
        model="smollm2",
        prompt=prompt,
        layer=3,
        head=1,
        settings={"colour scale": "sqrt"},
        link="http://127.0.0.1:8501/?m=1",
    )
    strip = Strip(tokens, rng.random(n_tokens), rows.start, "from")
    return caption, grid, fig, strip, labels[rows] * 2


def test_everything_a_person_typed_is_escaped():
    caption, grid, fig, strip, _ = synthetic(20, 8, layers=2, heads=2)
    caption = Caption(
        model=f"m{PAYLOAD}",
        prompt=f"hi {PAYLOAD}",
        layer=1,
        head=0,
        settings={f"k{PAYLOAD}": f"v{PAYLOAD}"},
        link='javascript:alert(1)//"><b>',
    )
    strip = Strip([PAYLOAD, *strip.tokens[1:]], strip.weights, 0, "to")
    html = view_html(caption, grid, fig, strip)
    body = html[html.index("</head>") :]
    assert "<script>alert" not in body and "<b>" not in body
    assert body.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5  # model, prompt, k, v, strip
    assert 'href="javascript' not in html  # only http(s) links become links
    assert "attention to the selected token" in body


def test_no_reference_outside_the_file():
    caption, grid, fig, strip, _ = synthetic(40, 16, layers=2, heads=3)
    html = view_html(replace(caption, layer=1, head=2), grid, fig, strip)
    assert not re.search(r"<script[^>]+src=|<link\b|@import|url\(\s*['\"]?http", html)
    assert not re.search(r"<img[^>]+src=\"(?!data:image/png;base64,)", html)
    assert "cdn.plot.ly" not in html.split("<script>", 2)[-1]  # the figure's own script
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert html.count("<img ") == 6 and "class=sel" in html
    assert 'href="http://127.0.0.1:8501/?m=1"' in html


def test_long_prompts_are_cut_in_the_caption():
    caption, grid, fig, strip, _ = synthetic(20, 8, layers=1, heads=1, prompt="x" * 5000)
    html = view_html(caption, grid, fig, strip)
    assert "x" * PROMPT_CHARS in html and "x" * (PROMPT_CHARS + 1) not in html
    assert "5,000 characters in all" in html


def test_size_at_2048_tokens_is_single_megabytes_and_estimated_before():
    caption, grid, fig, strip, labels = synthetic(N, 128)
    html = view_html(caption, grid, fig, strip)
    size = len(html.encode("utf-8"))
    assert 1024**2 < size < 10 * 1024**2
    estimate = export_size(grid, 128 * 128, labels, strip.tokens, caption)
    assert abs(estimate - size) / size < 0.05


def test_a_full_pattern_is_refused():
    side = int(MAX_HEATMAP_CELLS**0.5) + 1
    caption, grid, fig, strip, _ = synthetic(2 * side, side, layers=1, heads=1)
    with pytest.raises(ExportTooLarge, match="smaller detail window"):
        view_html(caption, grid, fig, strip)


def test_pictures_must_be_png():
    assert png_uri(b"\x89PNG").startswith("data:image/png;base64,")
    with pytest.raises(ValueError):
        png_uri("http://example.com/x.png")


def test_a_shorter_layer_ends_in_empty_cells():
    """A layer with fewer heads than the widest (a softmax layer beside a linear-attention layer
    with more value heads) writes empty cells where it has no head, and the size estimate
    still holds."""
    caption, grid, fig, strip, labels = synthetic(40, 16, layers=2, heads=4)
    grid[1] = [*grid[1][:2], "", ""]
    html = view_html(caption, grid, fig, strip)
    assert html.count('alt="head 1.') == 2 and html.count('alt="head 0.') == 4
    assert "<td></td><td></td></tr>" in html
    estimate = export_size(grid, 16 * 16, labels, strip.tokens, caption)
    size = len(html.encode("utf-8"))
    assert abs(estimate - size) / size < 0.05
