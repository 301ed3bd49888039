import csv
import io

import numpy as np
import pytest

from viz.circuits_figures import head_grid
from viz.compare_figures import divergence_grid
from viz.export import pattern_csv
from viz.generate_figures import step_grid_figure
from viz.heatmap import (
    canvas_data,
    colour_axis,
    head_heatmap,
    heatmap_data,
    heatmap_figure,
    masked,
)
from viz.kernel_figures import error_grid
from viz.thumbnails import pooled_png
from viz.token_view import token_spans

PAYLOAD = "<script>alert(1)</script>"


def test_token_spans_escape_the_prompt():
    html = token_spans([PAYLOAD, '"><img src=x onerror=alert(1)>'], np.array([0.2, 0.8]), 1, "from")
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count('class="tok') == 2 and 'class="tok sel" data-pos="1"' in html


def test_token_spans_mark_masked_tokens():
    html = token_spans(["a", "b"], np.array([1.0, np.nan]), 0, "from")
    assert "masked" in html and "opacity" in html


def test_heatmap_labels_are_escaped_and_masked_cells_blank():
    pattern = np.array([[1.0, 0.0], [0.25, 0.75]], dtype=np.float32)
    fig = head_heatmap(pattern, ["(0) " + PAYLOAD, "(1) b"], causal=True, title=PAYLOAD)
    trace = fig.data[0]
    assert all("<script>" not in label for label in trace.x)
    assert "<script>" not in fig.layout.title.text
    z = np.array(trace.z, dtype=float)
    assert np.isnan(z[0, 1]) and z[1, 0] == 0.25 and z[1, 1] == 0.75


def test_masked_leaves_bidirectional_patterns_whole():
    pattern = np.full((3, 3), 1 / 3, dtype=np.float32)
    assert not np.isnan(masked(pattern, causal=False)).any()


def test_pattern_csv_round_trip_and_formula_safety():
    pattern = np.array([[1.0, 0.0], [0.3, 0.7]])
    text = pattern_csv(pattern, ["=SUM(A1)", "b"])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["query \\ key", "(0) =SUM(A1)", "(1) b"]
    assert [float(x) for x in rows[2][1:]] == [0.3, 0.7]
    text = pattern_csv(pattern, ["a", "b"])
    assert "'(" not in text
    text = pattern_csv(np.eye(1), ["-1"])
    assert list(csv.reader(io.StringIO(text)))[1][0] == "(0) -1"


def test_a_window_csv_keeps_pinned_columns_and_leaves_masked_cells_empty():
    from viz.heatmap import masked

    pattern = np.arange(1, 7, dtype=np.float64).reshape(3, 2, order="F") / 10  # rows 2-4
    keys = [0, 3]  # key 0 pinned before the window's key 3
    shown = masked(pattern, causal=True, row0=2, cols=keys)
    rows = list(csv.reader(io.StringIO(pattern_csv(shown, list("abcde"), range(2, 5), keys))))
    assert rows[0] == ["query \\ key", "(0) a", "(3) d"]
    assert rows[1] == ["(2) c", "0.1", ""]  # query 2 cannot see key 3: empty, not 0
    assert rows[2] == ["(3) d", "0.2", "0.5"]
    assert rows[3] == ["(4) e", "0.3", "0.6"]


def test_a_sliding_window_blanks_keys_past_its_edge_but_never_the_sink_column():
    """Window 2 over 4 tokens: query i sees keys i - 1 and i (hand-written), the learned
    sink's column (SINK_KEY) every query; the CSV heads that column "sink"."""
    from models.model.variants.sinks import SINK_KEY

    keys = [SINK_KEY, 0, 1, 2, 3]
    shown = masked(np.ones((4, 5)), causal=True, cols=keys, window=2)
    seen = [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [1, 0, 0, 1, 1]]
    assert (np.isfinite(shown) == np.array(seen, dtype=bool)).all()
    rows = list(csv.reader(io.StringIO(pattern_csv(shown, list("abcd"), range(4), keys))))
    assert rows[0] == ["query \\ key", "sink", "(0) a", "(1) b", "(2) c", "(3) d"]
    assert rows[3] == ["(2) c", "1", "", "1", "1", ""]
    data = heatmap_data(shown, list("abcd"), causal=True, cols=keys, window=2, zmax=None)
    assert data.col_labels[0] == "sink" and np.isfinite(data.shown[:, 0]).all()


def test_spreadsheet_prefix():
    from viz.export import spreadsheet_safe

    assert spreadsheet_safe("=cmd") == "'=cmd" and spreadsheet_safe("ok") == "ok"


def test_pattern_png_is_a_png():
    pooled = np.array([[1.0, np.nan], [0.5, 0.5]])
    png = pooled_png(pooled, size=20)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.size == (20, 20)
    assert image.getpixel((15, 2)) == (225, 225, 225)  # masked cell is grey
    assert image.getpixel((2, 2)) == (8, 48, 107)  # weight 1 is the darkest blue


def test_thumbnails_are_normalised_per_head_on_a_square_root_scale():
    import io

    from PIL import Image

    faint = np.array([[1.0, np.nan, np.nan], [0.05, 0.02, np.nan], [0.01, 0.05, 0.0]])
    image = Image.open(io.BytesIO(pooled_png(faint, size=3))).convert("RGB")
    assert image.getpixel((0, 1)) == (8, 48, 107)  # 0.05 is this head's top outside row 0
    mid = image.getpixel((1, 1))  # 0.02 / 0.05 = 0.4 -> sqrt 0.632 of the way to dark blue
    want = [round(255 + (h - 255) * 0.4**0.5 - 0.5) for h in (8, 48, 107)]
    assert all(abs(a - b) <= 1 for a, b in zip(mid, want, strict=False))  # RGB of an RGBA pixel
    linear = Image.open(io.BytesIO(pooled_png(faint, size=3, normalise=False, gamma=1.0)))
    assert linear.convert("RGB").getpixel((1, 1))[0] > 240  # unnormalised, 0.02 is near white


def test_a_stack_of_pictures_is_shaded_per_picture():
    """Each picture of a stack keeps its own top: the same pixels as drawn alone, by hand."""
    import io

    from PIL import Image

    from viz.thumbnails import pooled_pngs

    strong = np.array([[1.0, np.nan], [0.9, 0.3]])
    faint = np.array([[1.0, np.nan], [0.02, 0.005]])
    empty = np.full((2, 2), np.nan)
    pictures = pooled_pngs(np.stack([strong, faint, empty]), size=2)
    rgb = [Image.open(io.BytesIO(png)).convert("RGB") for png in pictures]
    assert rgb[0].getpixel((0, 1)) == rgb[1].getpixel((0, 1)) == (8, 48, 107)  # own tops
    quarter = [round(255 + (h - 255) * 0.25**0.5) for h in (8, 48, 107)]  # 0.005 / 0.02
    assert all(abs(a - b) <= 1 for a, b in zip(rgb[1].getpixel((1, 1)), quarter, strict=True))
    assert {rgb[2].getpixel((x, y)) for x in (0, 1) for y in (0, 1)} == {(225, 225, 225)}
    assert pictures[1] == pooled_png(faint, size=2)


def test_colour_bar_labels_never_touch():
    """Square root of 1e-3 and 1e-4 lie 0.02 apart on a 0-1 bar: the lower label goes."""
    bar = colour_axis(1.0, "sqrt")["colorbar"]
    assert bar["ticktext"] == ["0.001", "0.01", "0.05", "0.1", "0.25", "0.5", "1"]
    np.testing.assert_allclose(bar["tickvals"], np.sqrt([1e-3, 1e-2, 0.05, 0.1, 0.25, 0.5, 1]))
    log = colour_axis(1.0, "log")  # evenly spread in log10: every label stays
    assert log["colorbar"]["ticktext"] == [
        "0.0001",
        "0.001",
        "0.01",
        "0.05",
        "0.1",
        "0.25",
        "0.5",
        "1",
    ]
    assert (log["zmin"], log["zmax"]) == (-4.0, 0.0)
    top = colour_axis(0.52, "linear")["colorbar"]  # the top (0.52) wins over 0.5 beside it
    assert top["ticktext"] == ["0.05", "0.1", "0.25", "0.52"]


def test_the_canvas_gets_the_weights_and_their_colours_by_hand():
    """Colour index = the weight's share of the colour range (square root here) times 254,
    masked cells 255; the weights travel as float32; ticks sit at their share of the bar."""
    import base64

    pattern = np.array([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.01, 0.09, 0.9]], dtype=np.float32)
    labels = ["(0) <a>", "(1) b", "(2) c"]
    data = canvas_data(heatmap_data(pattern, labels, causal=True, scale="sqrt", selected=1))
    levels = np.frombuffer(base64.b64decode(data["levels"]), np.uint8).reshape(3, 3)
    assert levels.tolist() == [[254, 255, 255], [127, 220, 255], [25, 76, 241]]
    # sqrt: 0.5 * 254 = 127; sqrt(0.75) * 254 = 219.97; 0.1 * 254 = 25.4; 0.3 * 254 = 76.2;
    # sqrt(0.9) * 254 = 240.97
    values = np.frombuffer(base64.b64decode(data["values"]), "<f4").reshape(3, 3)
    np.testing.assert_array_equal(np.tril(values), np.tril(pattern))
    assert np.isnan(values[0, 1]) and np.isnan(values[0, 2]) and np.isnan(values[1, 2])
    assert data["colours"][0] == [247, 251, 255] and data["colours"][-1] == [8, 48, 107]
    assert len(data["colours"]) == 255
    ticks = {text: share for share, text in data["ticks"]}
    assert ticks["0.25"] == 0.5 and ticks["1"] == 1.0 and ticks["0.01"] == pytest.approx(0.1)
    assert data["rows"][0] == "(0) <a>"  # plain text: the canvas draws it as text
    assert data["selected"] == 1 and data["pinned"] == 0


def test_plotly_and_the_canvas_draw_the_same_heatmap():
    pattern = np.array([[0.6, 0.4], [0.3, 0.7]], dtype=np.float32)
    data = heatmap_data(pattern, ["(0) a", "(1) b"], causal=False, zmax=None, scale="log")
    fig = heatmap_figure(data)
    assert fig.data[0].zmin == data.axis["zmin"] and fig.data[0].zmax == data.axis["zmax"]
    np.testing.assert_array_equal(np.array(fig.data[0].customdata, dtype=float), pattern)


def colour_bars(fig) -> list[dict]:
    """The colour bars ``fig`` shows, as plotly will draw them (from the figure's dict)."""
    bars = []
    for trace in fig.to_dict()["data"]:
        holder = trace if "colorbar" in trace else trace.get("marker", {})
        if "colorbar" in holder and holder.get("showscale", True):
            bars.append(holder["colorbar"])
    return bars


def test_every_colour_bar_is_titled_on_its_side():
    """A title on top widens the bar's room to the title's length; on its side it takes one
    line's height, whatever its length."""
    grid = np.array([[0.1, -0.4], [0.3, 0.0]])
    figures = [
        head_heatmap(np.eye(3), ["a", "b", "c"], causal=True, value_name="value-weighted weight"),
        divergence_grid(np.abs(grid), title="t"),
        head_grid(grid, title="t", value_name="patch effect"),
        step_grid_figure(np.abs(grid), title="t", value_name="sink"),
        error_grid(np.abs(grid), title="t"),
    ]
    for fig in figures:
        (bar,) = colour_bars(fig)
        assert bar["title"]["side"] == "right" and bar["title"]["text"]
