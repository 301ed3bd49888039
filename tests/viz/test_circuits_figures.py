"""Circuits figures: a colour scale centred at 0, escaped token text, parts grouped by kind."""

import numpy as np

from viz.circuits_figures import head_grid, parts_bars, position_bars, symmetric_range


def test_head_grid_is_centred_at_zero():
    values = np.array([[0.2, -0.9], [1.0, np.nan]])
    heat = head_grid(values, title="t", value_name="patch effect", floor=1.0).data[0]
    assert (heat.zmin, heat.zmax) == (-1.0, 1.0) and heat.texttemplate == "%{z:.2f}"
    assert symmetric_range(np.array([[0.1, -3.0]])) == 3.0
    assert symmetric_range(np.zeros((2, 2))) == 1.0
    big = head_grid(np.ones((30, 9)), title="t", value_name="DLA").data[0]
    assert big.texttemplate is None


def test_position_bars_escape_tokens_and_mark_differences():
    fig = position_bars(np.array([0.0, 0.5]), ["<b>x</b>", "y"], title="<i>", differs=[True, False])
    bar = fig.data[0]
    assert list(bar.x) == ["(0) &lt;b&gt;x&lt;/b&gt;", "(1) y"]
    assert bar.marker.color[0] != bar.marker.color[1]
    assert fig.layout.title.text == "&lt;i&gt;"
    (shade,) = fig.layout.shapes  # position 0 differs: its column is shaded though its bar is 0
    assert (shade.x0, shade.x1) == (-0.5, 0.5)


def test_parts_bars_one_trace_per_group():
    parts = [
        ("embeddings", "token embeddings", 0.5),
        ("heads", "heads of layer 0", 2.0),
        ("MLPs", "MLP 0", -1.0),
        ("biases", "unembedding bias", 0.0),
    ]
    fig = parts_bars(parts, title="parts")
    assert [trace.name for trace in fig.data] == ["embeddings", "heads", "MLPs", "biases"]
    assert sum(sum(trace.x) for trace in fig.data) == 1.5


def test_atp_scatter_states_the_agreement_and_names_the_worst_heads():
    from models.circuits.agreement import agreement
    from viz.circuits_figures import atp_scatter

    exact = np.array([[0.9, -0.5], [0.1, 0.0]])
    estimate = np.array([[0.2, -0.45], [0.1, 0.01]])
    found = agreement(estimate, exact, np.array([[True, False], [False, False]]), k=2, n_worst=1)
    fig = atp_scatter(estimate, exact, found, title="<b>IOI</b>")
    points = fig.data[0]
    assert list(points.customdata) == ["0.0", "0.1", "1.0", "1.1"]
    np.testing.assert_allclose(points.x, exact.ravel())
    np.testing.assert_allclose(points.y, estimate.ravel())
    assert fig.layout.title.text.startswith("&lt;b&gt;IOI&lt;/b&gt;<br><sub>Pearson ")
    assert "top-2 recall 1.00" in fig.layout.title.text
    assert [a.text for a in fig.layout.annotations] == ["0.0 (saturated)"]


def test_weight_figures():
    from models.circuits.weight_circuits import weight_data_correlation
    from viz.circuits_figures import weight_score_grid, weight_vs_data

    grid = weight_score_grid(np.array([[0.2, -0.3]]), title="copying", value_name="Σλ/Σ|λ|")
    assert (grid.data[0].zmin, grid.data[0].zmax) == (-1.0, 1.0)
    weight, data = np.array([[0.1, 0.9], [0.5, 0.2]]), np.array([[0.0, 1.0], [0.4, 0.3]])
    fig = weight_vs_data(
        weight,
        data,
        weight_data_correlation(weight, data),
        title="t",
        weight_name="QK previous",
        data_name="previous-token <score>",
    )
    assert list(fig.data[0].customdata) == ["0.0", "0.1", "1.0", "1.1"]
    assert fig.layout.xaxis.title.text == "previous-token &lt;score&gt;"
    assert "over 4 heads" in fig.layout.title.text


def test_a_grid_of_scores_that_cannot_be_negative_runs_from_white_at_zero():
    values = np.array([[0.0, 0.2], [0.4, np.nan]])
    signed = head_grid(values, title="t", value_name="v").data[0]
    plain = head_grid(values, title="t", value_name="v", signed=False).data[0]
    assert (signed.zmin, signed.zmax) == (-0.4, 0.4)
    assert (plain.zmin, plain.zmax) == (0.0, 0.4) and plain.zmid is None
    assert plain.colorscale[0][1] == "rgb(247,251,255)"  # Blues: white at 0
    assert plain.colorscale[-1][1] == "rgb(8,48,107)"


def test_long_part_names_get_the_margin_they_need():
    from viz.circuits_figures import parts_bars

    fig = parts_bars([("bias", "layer 0's attention output bias", 0.5)], title="The rest")
    assert fig.layout.yaxis.automargin is True and fig.layout.xaxis.automargin is True
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y > 1  # over the plot
    assert fig.layout.legend.yanchor == "bottom" and fig.layout.margin.t >= 90
