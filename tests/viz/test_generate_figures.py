"""Generation figures: the plotted numbers are the inputs' (means, shares, bytes), text escaped,
log scale only when perplexities span more than a factor of 10."""

import numpy as np

from models.classroom.costs import human_bytes
from viz.generate_figures import (
    eviction_figure,
    kv_cache_figure,
    step_grid_figure,
    step_series_figure,
)


def test_step_series_plots_means_and_the_output_share():
    sink = np.array([[[0.5, 0.1]], [[0.2, 0.2]]])  # step layer head
    prompt = np.array([[[1.0, 0.6]], [[0.5, 0.7]]])
    fig = step_series_figure(sink, prompt, ["<b>", "x"], head=(0, 1))
    means = {trace.name: list(trace.y) for trace in fig.data}
    assert np.allclose(means["attention on position 0 (sink), mean of all heads"], [0.3, 0.2])
    assert np.allclose(
        means["share on the prompt (position 0 included), mean of all heads"], [0.8, 0.6]
    )
    assert np.allclose(means["share on the model's own output, mean of all heads"], [0.2, 0.4])
    assert np.allclose(means["share on the prompt (position 0 included), head 0.1"], [0.6, 0.7])
    assert list(fig.data[0].text) == ["&lt;b&gt;", "x"]


def test_step_grid_holds_one_number_per_head():
    values = np.arange(6).reshape(2, 3) / 10
    heat = step_grid_figure(values, title="<t>", value_name="sink").data[0]
    assert np.allclose(heat.z, values) and (heat.zmin, heat.zmax) == (0.0, 1.0)


def test_kv_figure_lines_and_measured_point():
    lengths = np.array([0, 100, 200])
    series = {"model": lengths * 10.0, "MHA": lengths * 30.0, "MQA": lengths * 10.0 / 3}
    fig = kv_cache_figure(
        lengths, series, measured=(150, 1500), names={"model": "this model (GQA)"}
    )
    assert [t.name for t in fig.data] == ["this model (GQA)", "MHA", "MQA", "measured cache"]
    assert list(fig.data[1].y) == [0.0, 3000.0, 6000.0]
    assert list(fig.data[3].text) == [human_bytes(1500)]


def test_eviction_figure_lines_and_log_axis():
    rows = [
        ("full", 100, 5.0),
        ("window", 16, 900.0),
        ("window", 8, 2000.0),
        ("sinks", 8, 6.0),
        ("sinks", 16, 5.5),
    ]
    fig = eviction_figure(rows, n_tokens=100, names={"sinks": "<sinks>"})
    window = fig.data[0]
    assert list(window.x) == [8, 16] and list(window.y) == [2000.0, 900.0]
    assert fig.data[1].name == "&lt;sinks&gt;"
    assert list(fig.data[2].y) == [5.0, 5.0]
    assert fig.layout.yaxis.type == "log"
    flat = eviction_figure([("full", 100, 5.0), ("sinks", 8, 6.0)], n_tokens=100)
    assert flat.layout.yaxis.type == "linear"


def test_kv_ticks_are_round_in_the_unit_that_reads_best():
    from viz.generate_figures import byte_ticks

    assert byte_ticks(307.2 * 1024) == (
        [0, 100 * 1024, 200 * 1024, 300 * 1024],
        ["0 KiB", "100 KiB", "200 KiB", "300 KiB"],
    )
    values, texts = byte_ticks(864 * 2**20)
    assert texts == ["0 MiB", "200 MiB", "400 MiB", "600 MiB", "800 MiB"]
    assert values[-1] == 800 * 2**20


def test_an_alternative_equal_to_the_model_leaves_its_line_visible():
    """MHA on an MHA model draws the same numbers: dotted over the model's solid, wider line;
    the legend sits under the plot, which keeps the width."""
    lengths = np.array([1, 10])
    same = np.array([100.0, 1000.0])
    fig = kv_cache_figure(lengths, {"model": same, "MHA": same, "MQA": same / 4})
    lines = {trace.name: trace.line for trace in fig.data}
    assert lines["model"].dash is None and lines["MHA"].dash == "dot"
    assert lines["model"].width > lines["MHA"].width
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0
