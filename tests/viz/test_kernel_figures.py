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


def test_the_colour_bars_stack_at_the_right_and_the_panels_take_the_rest():
    """Both colour bars sit right of the third panel, one above the other (neither over a
    panel), so the three square panels share almost the whole width; the bars' titles are
    written across on top, so "Δ" is not turned into a glyph."""
    p = np.tril(np.full((4, 4), 0.25))
    fig = pattern_comparison(p, p, [str(i) for i in range(4)], causal=True, title="t")
    widths = [fig.layout[f"xaxis{s}"].domain for s in ("", "2", "3")]
    assert all(hi - lo >= 0.29 for lo, hi in widths)
    bars = [trace.colorbar for trace in fig.data if trace.showscale is not False]
    assert all(bar.x > widths[2][1] for bar in bars)
    (top, bottom) = sorted(bars, key=lambda bar: -bar.y)
    assert top.y - top.len / 2 > bottom.y + bottom.len / 2  # no overlap
    assert [bar.title.side for bar in bars] == ["top", "top"]
    assert {bar.title.text for bar in bars} == {"weight", "Δ"}


def test_a_long_prompts_panels_number_five_positions():
    n = 512
    p = np.tril(np.full((n, n), 1.0 / n))
    labels = [f"({i}) t{i}" for i in range(n)]
    fig = pattern_comparison(p, p, labels, causal=True, title="t")
    assert list(fig.layout.xaxis.ticktext) == ["0", "128", "256", "383", "511"]
    assert list(fig.layout.xaxis.tickvals) == [labels[i] for i in (0, 128, 256, 383, 511)]
    assert list(fig.layout.yaxis.ticktext) == list(fig.layout.xaxis.ticktext)
