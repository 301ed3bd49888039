"""Figure builders: the right numbers reach plotly, markers sit at the model's own scale."""

from __future__ import annotations

import numpy as np
import torch

from models.scaling.maths import factor_grid, sweep, synthetic_panel
from viz import scaling_figures as figs


def small_sweep():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 2, 4, 4, generator=gen)
    scores = scores.masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), -torch.inf)
    return sweep(scores, factor_grid(0.25, 4.0, 5))


def test_saturation_figure_marks_own_scale_and_plots_head():
    stats = small_sweep()
    fig = figs.saturation_figure(
        stats, stats.factors, x_title="c", own_x=1.0, picked_x=4.0, head=(1, 0)
    )
    head_traces = [t for t in fig.data if t.name == "head 1.0"]
    assert len(head_traces) == 5
    np.testing.assert_allclose(head_traces[2].y, stats.max_weight[:, 1, 0])
    means = [t for t in fig.data if t.name == "mean of all heads"]
    np.testing.assert_allclose(means[4].y, stats.jacobian.mean(axis=(1, 2)))
    # plotly draws a vertical line of a log axis at the data value given (checked in Chromium:
    # a line at x = 4 on a log axis lands on the pixel of 4, not of 10^4), so the lines carry c
    vlines = [s.x0 for s in fig.layout.shapes if s.type == "line" and s.x0 == s.x1]
    assert sum(np.isclose(v, 1.0) for v in vlines) == 5
    assert sum(np.isclose(v, 4.0) for v in vlines) == 5


def test_factor_axis_ticks_read_like_the_slider():
    stats = small_sweep()
    fig = figs.saturation_figure(stats, stats.factors, x_title="c", own_x=1.0)
    axis = fig.layout.xaxis
    assert list(axis.ticktext) == ["1/4", "1/2", "1", "2", "4"]
    np.testing.assert_allclose(axis.tickvals, [0.25, 0.5, 1.0, 2.0, 4.0])
    alpha = figs.saturation_figure(stats, np.linspace(0, 1, 5), x_title="a", own_x=0.5, log_x=False)
    assert alpha.layout.xaxis.ticktext is None  # a linear alpha axis keeps plotly's ticks
    vlines = [s.x0 for s in alpha.layout.shapes if s.type == "line" and s.x0 == s.x1]
    assert vlines.count(0.5) == 5


def test_loss_figure_circles_the_minimum():
    x = np.array([0.5, 1.0, 2.0])
    fig = figs.loss_figure(x, np.array([3.0, 2.5, 2.7]), x_title="c", own_x=1.0)
    assert list(fig.data[1].x) == [1.0] and list(fig.data[1].y) == [2.5]


def test_extremes_figure_escapes_tokens():
    p = np.full((2, 2), 0.5)
    fig = figs.extremes_figure([p, p], ["a", "b"], ["(0) <b>", "(1) x"], causal=True)
    assert fig.data[0].x[0] == "(0) &lt;b&gt;"
    assert np.isnan(fig.data[0].z[0][1])  # the causal mask is blank, not 0.5


def test_synthetic_figures_show_measured_values():
    panel = synthetic_panel(d_ks=(16, 32), n_pairs=500, n_rows=20, n_keys=8)
    var = figs.variance_figure(panel)
    np.testing.assert_allclose(var.data[1].y, panel.var_raw)
    np.testing.assert_allclose(var.data[0].y, [16, 32])
    top = figs.max_weight_figure(panel)
    np.testing.assert_allclose(top.data[2].y, 1 / 8)
    for fig in (var, top):  # two to a row: the legend below the axis, not beside the plot
        assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0


def test_panel_titles_hold_no_markup_plotly_would_print_literally():
    stats = small_sweep()
    fig = figs.saturation_figure(stats, stats.factors, x_title="c", own_x=1.0)
    titles = {a.text for a in fig.layout.annotations}
    assert {title for _, title in figs.PANELS} <= titles
    assert not [t for t in titles if "_" in t or "^" in t]
