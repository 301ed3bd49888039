"""Why-here figures: strongest parts first, the rest pooled without losing the total, escaped
token text, links to heads."""

from __future__ import annotations

import numpy as np
import pytest

from models.circuits.why import WhySplit
from models.circuits.why_bands import BandSplit
from models.circuits.why_effects import PartEffect
from models.circuits.why_rows import PairMap
from models.head import Head
from viz.why_figures import OTHER, band_bars, effect_bars, pair_map_figure, pooled, why_view

PAIRS = np.array(
    [
        [0.5, -0.1, 0.0],
        [2.0, 1.0, -4.0],
        [0.1, 0.2, 0.5],
    ]
)  # row totals 0.4, -1.0, 0.8; column totals 2.6, 1.1, -3.5; total 0.2


def cell(**changes) -> WhySplit:
    values = dict(
        head=Head(2, 1),
        query=5,
        key=3,
        query_token="<b>",
        key_token="x",
        query_parts=("embed", "1.2", "mlp.0"),
        key_parts=("embed", "0.3", "b_K"),
        pairs=PAIRS,
        position_bias=None,
        score=0.2 + 1e-7,
        softcap=None,
        weight=0.25,
        row_scale=7.0,
    )
    return WhySplit(**{**values, **changes})


def test_pooling_puts_the_strongest_first_and_keeps_the_total():
    matrix, rows, cols = pooled(cell(), top=1)
    assert rows == ["1.2", OTHER] and cols == ["b_K", OTHER]
    np.testing.assert_allclose(matrix, [[-4.0, 3.0], [0.5, 0.7]])
    assert matrix.sum() == pytest.approx(0.2, abs=1e-12)
    whole, rows, cols = pooled(cell(), top=3)
    assert OTHER not in rows + cols and whole.shape == (3, 3)
    np.testing.assert_allclose(whole, PAIRS[[1, 2, 0]][:, [2, 0, 1]])


def test_view_states_the_sum_beside_the_score_and_links_heads():
    view = why_view(cell(softcap=5.0), top=2)
    assert view.summary[0] == "Score (before the softmax): +0.2000"
    assert view.summary[1].startswith("Sum of the pairs: +0.2000 (difference -1.0e-07")
    assert view.summary[2] == (
        "Soft-cap 5·tanh(s/5): +0.2000 → +0.1999 (the pairs split the logit before the cap)"
    )
    assert view.summary[3] == "Weight on this key: 0.2500"
    assert view.top_pairs[0] == ("the key bias at the key × head 1.2's output at the query: -4")
    assert view.heads == ("1.2",)  # head 0.3 is pooled into "other" at top=2
    assert why_view(cell(), top=3).heads == ("0.3", "1.2")
    assert "&lt;b&gt;" in view.pairs.layout.title.text and "<b>" not in view.pairs.layout.title.text
    bars = view.parts.data
    assert [list(b.y) for b in bars] == [["1.2", "mlp.0", OTHER], ["b_K", "embed", OTHER]]
    np.testing.assert_allclose(bars[0].x, [-1.0, 0.8, 0.4])
    assert list(bars[0].customdata) == ["1.2", "", ""]
    assert view.bands is None


def test_band_bars_say_each_bands_wavelength():
    bands = BandSplit(
        head=Head(0, 0),
        query=4,
        key=1,
        query_parts=("embed",),
        key_parts=("embed",),
        labels=("0", "1", "unrotated"),
        wavelengths=np.array([6.283, 628.3, np.inf]),
        pairs=np.array([[[1.0, -0.5, 0.25]]]),
    )
    bar = band_bars(bands).data[0]
    assert list(bar.x) == ["0 (6.28 tokens)", "1 (628 tokens)", "unrotated (never turns)"]
    np.testing.assert_allclose(bar.y, [1.0, -0.5, 0.25])


def test_effect_bars_leave_a_gap_where_free_was_not_computed():
    effects = [
        PartEffect("1.2", "query", 2.0, 1.5, 0.1, 0.3, ((4, 0.2),)),
        PartEffect("b_Q", "query", -1.0, None, 0.1, 0.05, ()),
    ]
    frozen, free = effect_bars(effects).data
    assert list(frozen.y) == [2.0, -1.0]
    assert free.y[0] == 1.5 and np.isnan(free.y[1])


def test_the_pairs_title_sits_above_the_key_axis_on_top():
    """The key axis is drawn on top of the pairs matrix: its labels and name take the top
    margin's lower part, so the title is pinned to the figure's top edge with room below."""
    layout = why_view(cell(), None).pairs.layout
    assert layout.xaxis.side == "top" and layout.margin.t >= 90
    assert (layout.title.yref, layout.title.y, layout.title.yanchor) == ("container", 1.0, "top")


def test_the_pair_map_labels_each_axis_with_its_own_positions():
    """A window of a long prompt: queries 1,940-2,000 against keys 1,900-2,000. Each axis holds
    its own ``(i) token`` categories (the key axis is not the query axis), and past 64 of them
    five ticks give the positions by number."""
    tokens = [f"t{i}" for i in range(2001)]
    rows, cols = range(1940, 2001), range(1900, 2001)
    values = np.arange(len(rows) * len(cols), dtype=float).reshape(len(rows), len(cols))
    mapped = PairMap(Head(3, 6), "1.2", "embed", values, values.mean(axis=1))
    fig = pair_map_figure(mapped, tokens, rows, cols)
    heat = fig.data[0]
    assert list(heat.y) == [f"({i}) t{i}" for i in rows]
    assert list(heat.x) == [f"({i}) t{i}" for i in cols]
    assert fig.layout.yaxis.tickvals is None  # 61 rows: every label shown
    assert list(fig.layout.xaxis.ticktext) == ["1900", "1925", "1950", "1975", "2000"]
    assert list(fig.layout.xaxis.tickvals) == [
        f"({i}) t{i}" for i in (1900, 1925, 1950, 1975, 2000)
    ]
