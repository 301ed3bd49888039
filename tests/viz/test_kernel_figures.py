"""Figure builders of the kernel page: escaped labels, exact difference, masked cells."""

import numpy as np

from viz.kernel_figures import difference, error_grid, pattern_comparison


def test_pattern_comparison_shows_model_kernel_and_difference():
    model = np.array([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.2, 0.3, 0.5]], dtype=np.float32)
    kernel = model.copy()
    kernel[2, 1] += 3e-6
    labels = ["(0) <b>bold</b>", "(1) a&b", "(2) x"]
    fig = pattern_comparison(model, kernel, labels, causal=True, title="Head <1.2>")
    assert len(fig.data) == 3
    assert (
        next(iter(fig.data[0].x)) == "(0) &lt;b&gt;bold&lt;/b&gt;"
        and list(fig.data[2].y)[1] == "(1) a&amp;b"
    )
    assert "&lt;1.2&gt;" in fig.layout.title.text
    diff = np.asarray(fig.data[2].z, dtype=np.float64)
    assert np.isnan(diff[0, 1]) and np.isnan(diff[1, 2])  # future keys blank
    assert diff[2, 1] == np.float32(kernel[2, 1]) - np.float32(model[2, 1])
    assert np.nansum(np.abs(diff)) == abs(diff[2, 1])
    assert fig.data[2].zmid == 0.0 and fig.data[2].zmax == -fig.data[2].zmin > 0


def test_difference_is_kernel_minus_model():
    assert difference(np.array([[0.5]]), np.array([[0.25]])).tolist() == [[-0.25]]


def test_error_grid_uses_scientific_hover_and_zero_floor():
    errors = np.array([[1e-7, 2e-6], [0.0, 3e-8]])
    fig = error_grid(errors, title="max |P| <x>")
    heat = fig.data[0]
    assert np.asarray(heat.z).tolist() == errors.tolist()
    assert heat.zmin == 0.0 and heat.zmax == 2e-6 and ".3e" in heat.hovertemplate
    assert "&lt;x&gt;" in fig.layout.title.text
    assert error_grid(np.zeros((1, 2)), title="zeros").data[0].zmax > 0


def test_the_weight_bar_has_room_between_the_panels_and_titles_read_across():
    """The weight bar between panels 2 and 3 needs its bar, ticks and title (about 60 px): at
    least 0.14 of a plot 1,000 px wide is free there, whatever the column's width leaves; the
    bars' titles are written across on top, so "Δ" is not turned into a glyph."""
    p = np.tril(np.full((4, 4), 0.25))
    fig = pattern_comparison(p, p, [str(i) for i in range(4)], causal=True, title="t")
    gap = fig.layout.xaxis3.domain[0] - fig.layout.xaxis2.domain[1]
    assert gap >= 0.14
    bars = [trace.colorbar for trace in fig.data if trace.showscale is not False]
    assert [bar.title.side for bar in bars] == ["top", "top"]
    assert {bar.title.text for bar in bars} == {"weight", "Δ"}
