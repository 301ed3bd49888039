"""Classroom figures: escaped labelled matrices, −∞ cells, diagrams and human-unit ticks."""

import numpy as np

from models.classroom import costs
from viz.classroom_figures import (
    cost_chart,
    format_value,
    matrix_html,
    sharing_diagram,
    small_heatmap,
)


def test_matrix_html_escapes_labels_and_shows_minus_infinity():
    out = matrix_html(
        np.array([[0.5, -np.inf]]),
        ["<script>x</script>"],
        ["k1", "a&b"],
        decimals=3,
        title="<b>t</b>",
    )
    assert "<script>" not in out and "&lt;script&gt;" in out and "a&amp;b" in out
    assert "&lt;b&gt;t&lt;/b&gt;" in out
    assert ">0.500<" in out and ">−∞<" in out


def test_format_value():
    assert format_value(-0.0001, 3) == "0.000"
    assert format_value(-0.707, 3) == "-0.707"
    assert format_value(float("-inf"), 2) == "−∞"
    assert format_value(23.3952, 2) == "23.40"


def test_sharing_diagram_draws_one_line_per_query_head():
    fig = sharing_diagram([0, 0, 1, 1], "GQA")
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == 4
    assert list(fig.data[-1].x) == [0.5, 2.5]  # each KV head sits under its group


def test_cost_chart_ticks_are_human_units_and_heatmap_blanks_masked_cells():
    cfg = costs.PRESETS["Llama-2-7B-like (MHA)"]
    lengths = costs.sequence_lengths()
    fig = cost_chart(
        lengths,
        {"kv": costs.kv_cache_bytes(lengths, cfg)},
        title="KV",
        y_title="memory",
        fmt=costs.human_bytes,
        base=32,
    )
    assert "1 GiB" in fig.layout.yaxis.ticktext and "32 MiB" in fig.layout.yaxis.ticktext
    heat = small_heatmap(
        np.array([[0.0, -np.inf]]), title="m", x_labels=["a", "b"], y_labels=["a"], decimals=0
    )
    assert np.isnan(heat.data[0].z[0][1]) and heat.data[0].text[0][1] == "−∞"


def test_cost_chart_axis_stays_on_the_lengths_with_a_crossover_line():
    """A vertical line at n = 256 once stretched the log axis to 1e256 (shape x read as log10)."""
    lengths = np.array([16.0, 256.0, 4096.0])
    fig = cost_chart(
        lengths,
        {"a": lengths * 10.0, "b": lengths**2},
        title="t",
        y_title="y",
        fmt=str,
        base=10,
        crossover=256.0,
    )
    assert not fig.layout.shapes
    xs = np.concatenate([np.asarray(trace.x, dtype=float) for trace in fig.data])
    assert xs.min() >= 16 and xs.max() <= 4096
    line = [t for t in fig.data if "overtake" in t.name]
    assert len(line) == 1 and list(line[0].x) == [256.0, 256.0]


def test_a_heading_wider_than_its_table_stays_on_one_line():
    from viz.classroom_figures import matrix_html

    text = matrix_html(np.eye(2), ["q1", "q2"], ["k1", "k2"], title="A = softmax(S / √2)")
    assert "white-space:nowrap" in text.split("<caption", 1)[1].split(">", 1)[0]


def test_a_compact_tables_long_row_label_is_cut_with_the_whole_in_its_tooltip():
    """A real head's tables label rows with their tokens; a long one (a 4-digit position and a
    long token) would take the table's width from its numbers, so a compact table cuts it to
    12 characters and keeps the whole, escaped, in the cell's title."""
    long, short = "(1999) ␣moving_<average>", "(3) ␣the"
    text = matrix_html(np.zeros((2, 1)), [long, short], ["d1"], compact=True)
    assert '<th style="' in text and "(1999) ␣mov…" in text
    assert 'title="(1999) ␣moving_&lt;average&gt;"' in text
    assert f">{short}</th>" in text and "moving_&lt;average&gt;</th>" not in text
    wide = matrix_html(np.zeros((2, 1)), [long, short], ["d1"])  # a teaching table: whole
    assert "(1999) ␣moving_&lt;average&gt;</th>" in wide and "title=" not in wide
