"""Text shown through markdown shows as itself: rendered here by markdown-it (CommonMark, as
Streamlit's renderer follows it) and compared with what was typed."""

from __future__ import annotations

import html

import pytest
from markdown_it import MarkdownIt

from ui.text import code, md

RENDER = MarkdownIt("commonmark")
TOKENS = ["\\.", ".", "_", "):", "`", "a``b", "`x", "[x](http://e.example)", "<b>", "a\\_b", " "]


def inline_code(markdown: str) -> list[str]:
    """The text of every code span in ``markdown``, as the renderer reads it."""
    found = []
    for block in RENDER.parse(markdown):
        for child in block.children or []:
            if child.type == "code_inline":
                found.append(child.content)
    return found


@pytest.mark.parametrize("token", TOKENS)
def test_a_code_span_shows_the_token_itself(token):
    assert inline_code(f"high end: {code(token)} · low end: {code('x')}") == [token, "x"]


@pytest.mark.parametrize("token", TOKENS[:-1])
def test_escaped_text_shows_itself(token):
    shown = RENDER.renderInline(md(token))
    assert html.unescape(shown) == token
