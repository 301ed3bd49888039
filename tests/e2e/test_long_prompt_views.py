"""The explorer's browser components on a long prompt and a deep model: the chosen head is on
screen in the grid, and the token strip shows where the query attends however far back."""

from __future__ import annotations

import numpy as np
import pytest

from ui.widgets.components import shaded
from viz.thumbnails import data_uri, pooled_pngs

pytestmark = pytest.mark.e2e

N_LAYERS, N_HEADS, CELL = 30, 9, 52  # SmolLM2-135M's grid, as the explorer draws it
SHADOW = "document.querySelector('div').shadowRoot"  # where the harness mounts a component


def grid_cells() -> list[dict]:
    """Every head's picture: a causal pattern, as PNG data URIs the explorer sends."""
    pattern = np.tril(np.ones((64, 64), np.float32))
    pattern[np.triu_indices(64, 1)] = np.nan
    png = data_uri(pooled_pngs(pattern[None], 64)[0])
    heads = [(layer, head) for layer in range(N_LAYERS) for head in range(N_HEADS)]
    return [{"id": f"{layer}.{head}", "src": png} for layer, head in heads]


def visible_in(page, box: str, item: str) -> bool:
    """Whether ``item`` lies wholly inside the part of the scrolling ``box`` on screen."""
    return page.evaluate(
        "([box, item]) => {"
        f"  const root = {SHADOW};"
        """
          const b = root.querySelector(box).getBoundingClientRect();
          const i = root.querySelector(item).getBoundingClientRect();
          return i.height > 0 && i.top >= b.top && i.bottom <= b.bottom;
        }""",
        [box, item],
    )


def test_a_grid_drawn_afresh_shows_its_chosen_head(page, mount):
    """A link to head 18.7 of a 30-layer model opens with row 18 scrolled into the box (the
    pictures are drawn after the grid is laid out: the place of the row is known beforehand)."""
    render = mount("head_grid", width=560)
    render(
        {
            "cells": grid_cells(),
            "n_heads": N_HEADS,
            "selected": "18.7",
            "cell": CELL,
            "scroll": True,
            "kind": "pictures",
        }
    )
    page.wait_for_timeout(300)
    assert visible_in(page, ".gridbox", "button[data-head='18.7']")


def test_the_strip_shows_where_a_late_query_attends(page, mount):
    """Query 2,000 of a 2,001-token prompt attends to a sink at 0 and to token 1,000: the
    strip opens on token 1,000 (the selected token is a thousand tokens away), and its two
    buttons go to either."""
    n, query, far = 2001, 2000, 1000
    weights = np.full(n, 0.1 / (n - 2), np.float32)
    weights[0], weights[far] = 0.6, 0.3
    tokens = [f" w{i}" for i in range(n)]
    render = mount("token_strip")
    render({"shaded": shaded(tokens, weights, query, "from"), "span": None, "anchor": query})
    page.wait_for_timeout(200)
    token = ".tok[data-pos='{}']".format
    assert visible_in(page, ".toks", token(far))
    assert not visible_in(page, ".toks", token(query))
    page.evaluate(SHADOW + ".querySelector('.toknav button[data-go=sel]').click()")
    assert visible_in(page, ".toks", token(query))
    page.evaluate(SHADOW + ".querySelector('.toknav button[data-go=focus]').click()")
    assert visible_in(page, ".toks", token(far))
    label = page.evaluate(SHADOW + ".querySelector('.toknav button[data-go=focus]').textContent")
    assert label == f"Go to the strongest weight after the first token ({far})"  # 0 is larger
