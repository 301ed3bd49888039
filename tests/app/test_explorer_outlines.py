"""Where the explorer points on a prompt: the strip opens on the strongest weight, and the
heatmaps outline the selected token as a query (its row) or as a key (its column).

The expected positions come from Hugging Face eager attention on the same token ids.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from models.capture.run import capture
from tests.app.helpers import component_data, detail_heatmap, open_app
from ui.keys import Explorer
from ui.sections.explorer_compare_detail import HALF_PLOT_PX
from ui.widgets.components import strongest
from viz.heatmap import BAR_ROOM

PROMPT = "def area(w, h):\n    return w * h\n\ndef area(w, h):\n    return w * h\n"
LAYER, HEAD, TOKEN = 1, 2, 6


@pytest.fixture(scope="module")
def eager(bundled) -> np.ndarray:
    """``layer head query key`` patterns of PROMPT from Hugging Face eager attention."""
    ids = capture(bundled, PROMPT).token_ids
    hf = AutoModelForCausalLM.from_pretrained(
        bundled.spec.path_or_name, attn_implementation="eager"
    )
    with torch.no_grad():
        out = hf.eval()(torch.tensor([ids]), output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).double().numpy()


def top_beyond_first(weights: np.ndarray) -> int:
    """The strongest position past the first, checked to stand clear of the runner-up by more
    than float32 rounding (so the app's float32 weights pick the same one)."""
    rest = np.sort(weights[1:])
    assert rest[-1] - rest[-2] > 1e-4
    return int(np.argmax(weights[1:])) + 1


def strip_focus(at) -> int | None:
    return component_data(at, "atlas_token_strip")["shaded"]["focus"]


def test_strongest_leaves_out_the_first_position_and_masked_ones():
    assert strongest(np.array([0.7, 0.1, np.nan, 0.2])) == 3
    assert strongest(np.array([1.0, 0.0, 0.0])) is None
    assert strongest(np.array([np.nan, np.nan])) is None
    assert strongest(np.array([0.5])) is None


def test_the_strip_opens_on_where_the_query_attends_most(eager):
    at = open_app(model="bundled", prompt=PROMPT, layer=LAYER, head=HEAD)
    assert not at.exception
    last = eager.shape[2] - 1
    assert strip_focus(at) == top_beyond_first(eager[LAYER, HEAD, last, : last + 1])
    drawn = detail_heatmap(at)
    assert drawn["rows"][drawn["selected"]].startswith(f"({last}) ")
    assert drawn["selected_col"] is None


def test_which_tokens_attend_to_it_outlines_the_key_column(eager):
    at = open_app(model="bundled", prompt=PROMPT, layer=LAYER, head=HEAD, token=TOKEN)
    at.radio(key=Explorer.DIRECTION).set_value("to").run()
    assert not at.exception
    drawn = detail_heatmap(at)
    assert drawn["selected"] is None
    assert drawn["cols"][drawn["selected_col"]].startswith(f"({TOKEN}) ")
    column = eager[LAYER, HEAD, :, TOKEN]
    assert strip_focus(at) == top_beyond_first(column)


def test_compare_outlines_the_key_column_in_every_heatmap():
    """A, B and A − B on aligned positions (the renamed token's columns share one bin)."""
    at = open_app(
        model="bundled",
        prompt=PROMPT,
        mode="compare",
        b=PROMPT.replace("area", "size"),
        layer=LAYER,
        head=HEAD,
        token=TOKEN,
    )
    at.radio(key=Explorer.DIRECTION).set_value("to").run()
    assert not at.exception
    for key in (Explorer.HEATMAP_A, Explorer.HEATMAP_B, Explorer.HEATMAP_DIFF):
        found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(str(key))]
        fig = json.loads(found[0].proto.spec)
        n_rows = len(fig["data"][0]["y"])
        (box,) = [s for s in fig["layout"]["shapes"] if s["type"] == "rect"]
        col = int(box["x0"] + 0.5)
        assert box["x1"] == col + 0.5 and fig["data"][0]["x"][col].startswith(f"({TOKEN}) ")
        assert (box["y0"], box["y1"]) == (-0.5, n_rows - 0.5)


def test_compare_heatmaps_keep_square_cells_in_their_half_width_columns():
    """A, B and A − B of a 120-token window each sit in half the page: drawn with square
    cells in a plot about as tall as such a column is wide, never a tall strip; A and B keep
    the same room for one colour bar (B's), so that their plots, and cells, are equal."""
    long_a = PROMPT * 4
    at = open_app(
        model="bundled",
        prompt=long_a,
        mode="compare",
        b=long_a.replace("area", "size"),
        layer=LAYER,
        head=HEAD,
    )
    assert not at.exception
    drawn = {}
    for key in (Explorer.HEATMAP_A, Explorer.HEATMAP_B, Explorer.HEATMAP_DIFF):
        found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(str(key))]
        drawn[key] = fig = json.loads(found[0].proto.spec)
        layout = fig["layout"]
        assert layout["yaxis"]["scaleanchor"] == "x" and layout["yaxis"]["scaleratio"] == 1
        margin = layout["margin"]
        assert layout["height"] - margin["t"] - margin["b"] == HALF_PLOT_PX
        assert margin["r"] >= BAR_ROOM  # the colour bar's room, shown or not
    a, b, diff = (drawn[k] for k in (Explorer.HEATMAP_A, Explorer.HEATMAP_B, Explorer.HEATMAP_DIFF))
    for key in ("margin", "height"):
        assert a["layout"][key] == b["layout"][key] == diff["layout"][key]
    assert a["layout"]["xaxis"].get("domain", [0, 1]) == b["layout"]["xaxis"].get("domain", [0, 1])
    assert a["data"][0]["y"] == b["data"][0]["y"] and a["data"][0]["x"] == b["data"][0]["x"]
    assert [fig["data"][0].get("showscale", True) for fig in (a, b, diff)] == [False, True, True]
    assert b["data"][0]["colorbar"]["title"] == {"text": "weight in B", "side": "right"}
    for fig in (b, diff):  # the cells and their bar start at the plot's top, under the labels
        assert fig["layout"]["yaxis"]["constraintoward"] == "top"
        bar = fig["data"][0]["colorbar"]
        assert (bar["y"], bar["yanchor"]) == (1, "top")
