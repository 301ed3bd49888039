"""The divergence grid: values, colour scale from zero, escaping."""

import numpy as np

from viz.compare_figures import divergence_grid

PAYLOAD = "<script>alert(1)</script>"


def test_divergence_grid_colours_every_head_from_zero():
    values = np.array([[0.0, 0.1, 0.02], [0.3, 0.05, 0.0]])
    fig = divergence_grid(values, title=PAYLOAD, selected=(1, 0))
    trace = fig.data[0]
    np.testing.assert_array_equal(np.array(trace.z, dtype=float), values)
    assert trace.zmin == 0.0 and trace.zmax == 0.3
    assert list(trace.x) == ["0", "1", "2"] and list(trace.y) == ["0", "1"]
    shape = fig.layout.shapes[0]
    assert (shape.x0, shape.x1, shape.y0, shape.y1) == (-0.5, 0.5, 0.5, 1.5)
    assert "<script>" not in fig.layout.title.text
    assert divergence_grid(values, title="t", zmax=1.0).data[0].zmax == 1.0


def test_near_zero_divergence_keeps_a_floor_and_is_said_in_words():
    from viz.compare_figures import (
        DIVERGENCE_FLOOR,
        divergence_scale,
        divergence_summary,
        divergence_text,
    )

    noise = np.array([[0.0004, 0.0012], [0.0, 3e-5]])
    names = ["0.0", "0.1", "1.0", "1.1"]
    assert divergence_scale(noise) == DIVERGENCE_FLOOR
    assert divergence_grid(noise, title="t").data[0].zmax == DIVERGENCE_FLOOR
    said = divergence_summary(noise, names)
    assert "less than 0.01 bits (largest 0.0012 bits, head 0.1)" in said
    assert "identically up to rounding" in divergence_summary(noise * 1e-4, names)
    assert "0.3000 bits (head 1.0)" in divergence_summary(np.array([[0.1, 0.0], [0.3, 0]]), names)
    texts = [divergence_text(v) for v in (0.0, 0.234, 0.0123, 0.0012, 0.00031, 3e-5, 1.0)]
    assert texts == ["0", ".234", ".012", ".0012", ".00031", "3e-5", "1"]
    assert divergence_text(0.234, compact=True) == ".23"
