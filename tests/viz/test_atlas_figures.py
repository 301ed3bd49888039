"""The atlas scatter: its points are the table's numbers, flagged heads are marked, and two
atlases can share their axes."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from viz.atlas_figures import FLAGGED, PLAIN, SIZE_RANGE, atlas_scatter, marker_sizes, shared_ranges


def table(n_layers: int = 3, n_heads: int = 4, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = n_layers * n_heads
    layers, heads = np.divmod(np.arange(n), n_heads)
    data = {
        "L.H": [f"{layer}.{head}" for layer, head in zip(layers, heads, strict=True)],
        "layer": layers,
        "head": heads,
        "flags": [""] * n,
        "entropy": rng.random(n) * 3,
        "entropy_se": rng.random(n) * 0.1,
        "previous_token": rng.random(n),
        "previous_token_se": rng.random(n) * 0.05,
        "sink": rng.random(n),
        "ov_copying": rng.random(n) * 2 - 1,
        "ov_copying_se": [np.nan] * n,
    }
    frame = pd.DataFrame(data)
    frame.loc[1, "flags"] = "Previous token"
    frame.loc[5, "flags"] = "Induction, Sink (first token)"
    frame.loc[7, "entropy"] = np.nan  # not measured: left out
    return frame


def test_points_are_the_tables_numbers():
    frame = table()
    fig = atlas_scatter(frame, "entropy", "previous_token", colour="sink", size="ov_copying")
    trace = fig.data[0]
    kept = frame.drop(index=7)
    assert isinstance(trace, go.Scatter) and len(trace.x) == 11
    np.testing.assert_array_equal(trace.x, kept["entropy"])
    np.testing.assert_array_equal(trace.y, kept["previous_token"])
    np.testing.assert_array_equal(trace.marker.color, kept["sink"])
    np.testing.assert_array_equal(trace.error_x.array, kept["entropy_se"])
    np.testing.assert_array_equal(trace.error_y.array, kept["previous_token_se"])
    assert [row[0] for row in trace.customdata] == kept["L.H"].tolist()
    # head 1.3 (row 7) is left out, so 2.0 is the eighth point
    assert trace.customdata.tolist()[7][:3] == ["2.0", "2", "0"]
    symbols = list(trace.marker.symbol)
    assert symbols[1] == symbols[5] == FLAGGED and symbols.count(PLAIN) == 9
    np.testing.assert_allclose(trace.marker.size, marker_sizes(kept["ov_copying"].to_numpy()))
    assert "1 without a value" in fig.layout.title.text


def test_no_error_bars_where_the_table_has_no_standard_error():
    fig = atlas_scatter(table(), "ov_copying", "sink")
    assert fig.data[0].error_x.visible is False and fig.data[0].error_y.visible is False


def test_many_heads_draw_with_webgl():
    big = table(n_layers=32, n_heads=32)  # 1,024 heads, a 7B model's count
    fig = atlas_scatter(big, "entropy", "previous_token", colour="sink")
    assert isinstance(fig.data[0], go.Scattergl) and len(fig.data[0].x) == 1023
    np.testing.assert_array_equal(fig.data[0].y, big.drop(index=7)["previous_token"])


def test_marker_sizes_by_hand():
    low, high = SIZE_RANGE
    sizes = marker_sizes(np.array([0.0, 5.0, 10.0, np.nan]))
    np.testing.assert_allclose(sizes, [low, (low + high) / 2, high, (low + high) / 2])
    np.testing.assert_allclose(marker_sizes(np.array([2.0, 2.0])), [(low + high) / 2] * 2)


def test_shared_ranges_hold_both_atlases_with_their_error_bars():
    a, b = table(seed=1), table(seed=2)
    b["entropy"] = b["entropy"] + 10
    (x_low, x_high), (y_low, y_high) = shared_ranges([a, b], "entropy", "previous_token")
    for frame in (a, b):
        low = (frame["entropy"] - frame["entropy_se"]).min()
        high = (frame["entropy"] + frame["entropy_se"]).max()
        assert x_low < low and x_high > high
    both = pd.concat([a, b])
    assert y_low < (both["previous_token"] - both["previous_token_se"]).min()
    assert y_high > (both["previous_token"] + both["previous_token_se"]).max()
    fig = atlas_scatter(a, "entropy", "previous_token", ranges=((x_low, x_high), (y_low, y_high)))
    assert tuple(fig.layout.xaxis.range) == pytest.approx((x_low, x_high))


def test_labels_and_flags_are_escaped():
    frame = table()
    frame.loc[0, "flags"] = "<b>x</b>"
    fig = atlas_scatter(frame, "entropy", "sink", labels={"entropy": "<i>Entropy</i>"}, title="<t>")
    assert (
        "&lt;i&gt;Entropy" in fig.layout.xaxis.title.text and "&lt;t&gt;" in fig.layout.title.text
    )
    assert fig.data[0].customdata[0][4] == "&lt;b&gt;x&lt;/b&gt;"


def test_an_unknown_column_is_refused():
    with pytest.raises(ValueError, match="no column"):
        atlas_scatter(table(), "entropy", "nothing")


def test_a_click_can_select_a_head():
    """Streamlit's chart sets click selection off whenever the drag mode is lasso or box
    select; the atlas's card opens on a click, so the map keeps click selection and zooms on a
    drag (the Chromium test clicks a point)."""
    fig = atlas_scatter(table(), "ov_copying", "sink")
    assert fig.layout.clickmode == "event+select"
    assert fig.layout.dragmode not in ("lasso", "select")
