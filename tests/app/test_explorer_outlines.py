"""Where the explorer points on a prompt: the strip opens on the strongest weight, and the
heatmaps outline the selected token as a query (its row) or as a key (its column).

The expected positions come from Hugging Face eager attention on the same token ids.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from models.capture.run import capture
from tests.app.helpers import component_data, detail_heatmap, heatmaps, open_app
from ui.keys import Explorer
from ui.widgets.components import strongest

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
    drawn = heatmaps(at)
    assert len(drawn) == 3  # A, B and A − B, on the page's canvas
    for data in drawn:
        col = data["selected_col"]
        assert data["selected"] is None and data["cols"][col].startswith(f"({TOKEN}) ")


def test_compare_draws_a_b_and_their_difference_on_one_window():
    """A and B on one colour scale, A − B on the signed scale from minus to plus its largest
    difference, all three over the same window and labels; the numbers are the
    two runs' weights and their difference."""
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
    a, b, diff = heatmaps(at)
    assert a["rows"] == b["rows"] == diff["rows"] and a["cols"] == b["cols"] == diff["cols"]
    assert a["ticks"] == b["ticks"] and a["colours"] == b["colours"]
    assert (a["value_name"], b["value_name"], diff["value_name"]) == (
        "weight in A",
        "weight in B",
        "A − B",
    )
    assert diff["colours"][0] != a["colours"][0]  # the signed scale: blue below 0
    seen = np.isfinite(a["values"]) & np.isfinite(b["values"])
    np.testing.assert_allclose(diff["values"][seen], (a["values"] - b["values"])[seen], atol=1e-6)
    top = float(np.nanmax(np.abs(diff["values"])))  # the default range keeps key 0 in
    ticks = {text: share for share, text in diff["ticks"]}
    assert ticks["0"] == 0.5 and abs(float(diff["ticks"][-1][1]) - top) <= 5e-3 * top
