"""The direct-logit-attribution parts chart shows logits, not shares: its bars are the parts'
contributions and add up to LD, and the axis and hover say so."""

import numpy as np

from models.circuits import baseline, copying_task, prepare
from viz.circuits_figures import head_grid, parts_bars


def test_the_bars_are_logits_that_add_up_to_ld_and_the_axis_says_so(bundled):
    dla = baseline(bundled, prepare(bundled, copying_task(bundled))).attribution
    fig = parts_bars(dla.parts(), title="parts")
    total = sum(float(np.sum(trace.x)) for trace in fig.data)
    assert abs(total - dla.logit_diff) < 1e-3 * max(1.0, abs(dla.logit_diff))
    assert max(abs(x) for trace in fig.data for x in trace.x) > 1.0  # not shares of LD
    axis = fig.layout.xaxis.title.text
    assert "share" not in axis and "logits" in axis and "LD" in axis
    assert all("logits" in trace.hovertemplate for trace in fig.data)


def test_grid_columns_can_name_shared_key_value_heads():
    fig = head_grid(
        np.zeros((2, 3)),
        title="t",
        value_name="AtP* of k",
        columns=["kv 0 (q 0–2)", "kv 1 (q 3–5)", "<kv>"],
        column_title="kv head",
    )
    heat = fig.data[0]
    assert list(heat.x) == ["kv 0 (q 0–2)", "kv 1 (q 3–5)", "&lt;kv&gt;"]
    assert heat.hovertemplate.startswith("layer %{y}, %{x}")
    assert fig.layout.xaxis.title.text == "kv head"
