"""The explorer's browser components on a long prompt and a deep model: the chosen head is on
screen in the grid, and the token strip shows where the query attends however far back."""

from __future__ import annotations

import numpy as np
import pytest

from viz.thumbnails import data_uri, pooled_pngs

pytestmark = pytest.mark.e2e

N_LAYERS, N_HEADS, CELL = 30, 9, 52  # SmolLM2-135M's grid, as the explorer draws it


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
        """([box, item]) => {
          const root = document.querySelector('div').shadowRoot;
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
