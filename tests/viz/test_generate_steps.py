"""One generation step by step: the plotted rows are the inputs (max-pooled only when long), the
written tokens' HTML is escaped and carries each token's numbers."""

import html
import re

import numpy as np

from viz.generate_steps import output_spans, pooled_columns, step_rows_figure, token_stats_figure


def test_pooling_keeps_each_columns_largest_weight():
    rows = np.zeros((2, 10), dtype=np.float32)
    rows[0, 7] = 0.9  # one bright key in the third column of width 3
    rows[1, 9] = 0.4  # in the short last column
    pooled, width = pooled_columns(rows, max_columns=4)
    assert width == 3 and pooled.shape == (2, 4)
    assert np.allclose(pooled[0], [0, 0, 0.9, 0]) and np.allclose(pooled[1], [0, 0, 0, 0.4])
    same, one = pooled_columns(rows, max_columns=10)
    assert one == 1 and same is rows


def test_every_heads_row_is_drawn_as_given_with_the_chosen_head_marked():
    rng = np.random.default_rng(0)
    rows = rng.random((3, 4, 6)).astype(np.float32)
    rows /= rows.sum(-1, keepdims=True)
    fig = step_rows_figure(rows, n_prompt=4, step=1, chosen=(2, 1))
    heat = fig.data[0]
    assert np.allclose(heat.customdata, rows.reshape(12, 6))
    assert np.allclose(heat.z, np.sqrt(rows.reshape(12, 6)))
    assert list(heat.y) == [f"{layer}.{h}" for layer in range(3) for h in range(4)]
    line, *rules = fig.layout.shapes
    assert line.x0 == 3.5  # where the output starts
    assert [rule.y0 for rule in rules] == [3.5, 7.5]  # between layers
    (mark,) = fig.layout.annotations  # beside the row of head 2.1, not over it
    assert mark.y == "2.1" and mark.text == "◀ 2.1" and mark.xref == "paper" and mark.x == 1.0
    assert list(fig.layout.yaxis.ticktext) == ["0", "1", "2"]


def test_long_rows_are_pooled_and_say_so():
    rows = np.zeros((1, 2, 1300), dtype=np.float32)
    rows[0, 1, 1234] = 1.0
    fig = step_rows_figure(rows, n_prompt=1200, step=0, max_columns=600)
    heat = fig.data[0]
    assert np.asarray(heat.customdata).shape == (2, 434)
    assert np.asarray(heat.customdata)[1].max() == 1.0
    assert "largest of 3 keys" in fig.layout.title.text


def test_output_spans_escape_and_carry_probability_entropy_and_alternatives():
    labels = ["<b>", "x&y"]
    spans = output_spans(
        labels,
        [0.9, 0.1],
        [0.3, 2.5],
        [[("<b>", 0.9), ('"q"', 0.05)], [("z", 0.6), ("x&y", 0.1)]],
        1,
    )
    texts = re.findall(r">([^<]*)</span>", spans)
    assert texts == [html.escape("<b>"), html.escape("x&y")]
    tips = [html.unescape(t) for t in re.findall(r'title="([^"]*)"', spans)]
    assert tips[0].startswith("step 0: '<b>' · probability 0.900 · entropy 0.30 nats")
    assert "'\"q\"' 0.050" in tips[0] and "'z' 0.600" in tips[1]
    assert re.findall(r'data-pos="(\d+)"', spans) == ["0", "1"]
    assert spans.count('class="tok sel"') == 1 and 'class="tok sel" data-pos="1"' in spans


def test_token_stats_plot_the_given_numbers():
    fig = token_stats_figure([0.5, 0.25], [1.0, 2.0], ["a", "<b>"], step=1)
    bars, line = fig.data
    assert list(bars.y) == [0.5, 0.25] and list(line.y) == [1.0, 2.0]
    assert list(bars.text) == ["a", "&lt;b&gt;"]


def test_keys_past_a_sliding_window_are_blank_not_zero():
    """Layer 0 slides over 3 keys, layer 1 is global: at a step over 8 keys, layer 0's heads
    are blank (NaN) on keys 0-4 and drawn on 5-7; pooled two keys a column, a column the query
    cannot see at all stays blank and the others keep their largest weight."""
    rows = np.zeros((2, 2, 8), dtype=np.float32)
    rows[0, :, 5:] = [0.2, 0.3, 0.5]
    rows[1] = 1 / 8
    z = np.asarray(step_rows_figure(rows, 4, step=0, windows=[3, None]).data[0].customdata)
    assert np.isnan(z[:2, :5]).all() and np.isfinite(z[:2, 5:]).all() and np.isfinite(z[2:]).all()
    pooled = np.asarray(
        step_rows_figure(rows, 4, step=0, windows=[3, None], max_columns=4).data[0].customdata
    )
    assert np.isnan(pooled[:2, :2]).all()
    np.testing.assert_allclose(pooled[0, 2:], [0.2, 0.5])  # keys 4-5 (5 seen), keys 6-7
