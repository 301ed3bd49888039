"""Every page opens each 2025-26 attention variant (tiny random checkpoints, local folders)
without an exception; DiffLlama is refused in one line that names it."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from PIL import Image
from transformers import AutoConfig, AutoTokenizer

from tests.app.helpers import (
    component_data,
    component_data_all,
    detail_heatmap,
    has_heatmap,
    open_app,
    open_classroom_tab,
    strip_weights,
    texts,
)
from tests.attention.tiny_variants import build_mamba2, build_variants
from tests.model.variant_reference import (
    eager,
    hf_attentions,
    hf_gate,
    hf_value_weighted,
    mixing_inside_transformers,
)
from ui.keys import Explorer, Generate, HeadAtlas, Scaling, Sidebar
from viz.colours import SIGNED
from viz.heatmap import heatmap_data, heatmap_figure

OPENED = ["gpt_oss", "gemma2", "gemma3", "qwen3", "qwen3_next", "deepseek_v3"]
PAGES = [
    "pages/heads.py",
    "pages/circuits.py",
    "pages/generate.py",
    "pages/scaling.py",
    "pages/classroom.py",
    "pages/kernel.py",
    "pages/atlas.py",
]
PROMPT = "def main(args): return args.out and the model is here. The model is here again."


@pytest.fixture(scope="module")
def variant_dirs(tmp_path_factory):
    return build_variants(tmp_path_factory.mktemp("variant_pages"))


@pytest.fixture
def allowed(variant_dirs, monkeypatch):
    root = next(iter(variant_dirs.values())).parent
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", str(root))
    return variant_dirs


def opened_on(path) -> object:
    at = open_app(model="bundled", prompt=PROMPT)
    at.selectbox(key=Sidebar.SOURCE).set_value("local").run()
    at.text_input(key=Sidebar.NAME).set_value(str(path)).run()
    return at


@pytest.mark.parametrize("name", OPENED)
@pytest.mark.slow
def test_every_page_opens_each_variant(name, allowed):
    at = opened_on(allowed[name])
    assert not at.exception, name
    assert has_heatmap(at), texts(at)[-800:]
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (name, page)
        starts = [b for b in at.button if b.key in (HeadAtlas.START, Scaling.START)]
        if starts:  # costly work starts when asked: ask, so every variant is measured
            starts[0].click()
            at.session_state[Sidebar.SOURCE] = "local"
            at.session_state[Sidebar.NAME] = str(allowed[name])
            at.run()
            assert not at.exception, (name, page, "asked")


def test_differential_attention_is_refused_in_one_line(allowed):
    at = opened_on(allowed["diffllama"])
    assert not at.exception
    said = texts(at)
    assert "DiffLlama" in said
    assert "Still showing the last model that loaded" in said


def test_a_state_space_model_is_refused_in_one_line(tmp_path, monkeypatch):
    """Mamba-2 (every layer a state-space mixer): refused at load in one line naming the
    architecture and the layer, the last model kept; it used to load, then fail at the first
    prompt with a KeyError on the missing attention pattern."""
    path = build_mamba2(tmp_path)
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", str(tmp_path))
    at = opened_on(path)
    assert not at.exception
    said = texts(at)
    assert "Mamba2ForCausalLM: layer 0 is a state-space mixer" in said
    assert "Still showing the last model that loaded" in said
    assert str(tmp_path) not in said  # named inside the allowed folder, never resolved


def test_a_learned_sink_is_stated_and_closes_the_row(allowed):
    """gpt-oss: the explorer says what share of the selected query's attention went to the
    head's sink, and that share plus the weights drawn for that row is 1."""
    at = opened_on(allowed["gpt_oss"])
    at.selectbox(key=Explorer.TOKEN).set_value(1).run()  # few keys: the sink weighs in
    found = re.search(
        r"this head puts ([0-9.]+)% of query (\d+)'s attention on its sink", texts(at)
    )
    assert found, texts(at)[-1200:]
    sink, query = float(found.group(1)) / 100, int(found.group(2))
    drawn = detail_heatmap(at)
    assert drawn["cols"][0] == "sink"
    assert abs(sink + np.nansum(drawn["values"][query, 1:]) - 1.0) <= 1e-3  # 3 digits shown
    assert abs(sink - drawn["values"][query, 0]) <= 1e-3
    assert query == 1 and 0.01 < sink < 1.0


@pytest.mark.parametrize("layer", [0, 1])
def test_a_learned_sink_is_a_column_and_a_window_blanks_past_its_edge(allowed, layer):
    """gpt-oss (layer 0 slides over 6 keys, layer 1 is global): the detail heatmap's first
    column, "sink", is 1 minus Hugging Face's eager row sum, so every drawn row sums to 1; the
    keys are HF's weights, blank exactly where the query cannot see them (later keys, and on
    the sliding layer keys past the window's edge, where HF puts 0); the strip's "sink" item is
    the selected query's sink."""
    path = allowed["gpt_oss"]
    at = opened_on(path)
    at.selectbox(key=Explorer.LAYER).set_value(layer).run()
    at.selectbox(key=Explorer.TOKEN).set_value(12).run()
    drawn = detail_heatmap(at)
    n = drawn["n_rows"]
    pieces = AutoTokenizer.from_pretrained(path)(PROMPT).input_ids
    ids = torch.tensor([[0, *pieces]])  # the bridge puts BOS (id 0) first
    head = at.selectbox(key=Explorer.HEAD).value
    hf = hf_attentions(path, ids)[layer][0, head].double().numpy()
    assert n == drawn["n_cols"] - 1 > 12 and drawn["cols"][0] == "sink" and drawn["pinned"] == 1
    np.testing.assert_allclose(drawn["values"][:, 0], 1 - hf.sum(-1), atol=1e-5)
    np.testing.assert_allclose(np.nansum(drawn["values"], axis=1), 1.0, atol=1e-5)
    i, j = np.indices((n, n))
    hidden = (j > i) | ((i - j >= 6) if layer == 0 else False)
    keys = drawn["values"][:, 1:]
    assert (np.isnan(keys) == hidden).all()
    assert np.abs(hf[hidden]).max() == 0.0  # HF gives what is blank no weight at all
    np.testing.assert_allclose(keys[~hidden], hf[~hidden], atol=1e-5)
    if layer == 0:
        assert (1 - hf.sum(-1)).max() > 0.05  # the sink takes a visible share somewhere
    strip = component_data(at, "atlas_token_strip")["shaded"]
    assert abs(strip["sink"] - (1 - hf[12].sum())) <= 1e-5
    np.testing.assert_allclose(strip_weights(at)[:13], hf[12, :13], atol=1e-5)
    assert any("learned sink, which is no token" in c.value for c in at.caption)


def test_a_linear_layer_says_it_is_not_a_softmax(allowed):
    at = opened_on(allowed["qwen3_next"])
    assert not at.exception
    assert "linear attention (Gated DeltaNet), not a softmax" in texts(at).replace("\n", " ")


def test_a_linear_layer_is_drawn_signed_and_a_softmax_layer_is_not(allowed):
    """Qwen3-Next: layer 0's heatmap holds its mixing matrix (as transformers' delta rule mixes
    one-hot values) on the signed scale, from -max|M| (blue) through 0 (white) to +max|M|
    (red); layer 1 (softmax) keeps the 0-1 weight scale."""
    at = opened_on(allowed["qwen3_next"])
    path = allowed["qwen3_next"]
    drawn = detail_heatmap(at)
    n = drawn["n_rows"]
    ids = AutoTokenizer.from_pretrained(path)(PROMPT, return_tensors="pt").input_ids[:, :n]
    head = at.selectbox(key=Explorer.HEAD).value
    want = mixing_inside_transformers(path, ids)[head].numpy()
    assert drawn["n_cols"] == n == want.shape[0] and at.selectbox(key=Explorer.LAYER).value == 0
    lower = np.tril(np.ones((n, n), dtype=bool))
    np.testing.assert_allclose(drawn["values"][lower], want[lower], atol=1e-5, rtol=1e-4)
    assert np.isnan(drawn["values"][~lower]).all()
    assert (want < -1e-3).any() and (want > 1e-3).any()  # signed: both colours are used
    top = float(np.abs(want[lower]).max())
    levels = np.rint((want + top) / (2 * top) * 254)
    assert np.abs(drawn["levels"][lower] - levels[lower]).max() <= 1  # -top..top, 0 mid-way
    assert drawn["value_name"] == "mixing (signed)"
    assert drawn["colours"][127] == [247, 247, 247]  # RdBu_r's white at 0
    assert drawn["colours"][0][2] > drawn["colours"][0][0]  # blue below 0
    assert drawn["colours"][-1][0] > drawn["colours"][-1][2]  # red above
    ticks = {text: share for share, text in drawn["ticks"]}
    assert ticks["0"] == 0.5 and abs(float(drawn["ticks"][-1][1]) - top) <= 5e-3 * top  # 3 digits
    assert "can be negative" in texts(at)
    labels = [str(i) for i in range(n)]
    figure = heatmap_figure(heatmap_data(want, labels, causal=True, signed=True)).data[0]
    assert figure.zmid == 0 and figure.zmin == -figure.zmax and abs(figure.zmax - top) < 1e-6
    assert figure.colorbar.title.text == "mixing (signed)"
    assert figure.colorscale == go.Heatmap(colorscale=SIGNED).colorscale  # red +, blue -

    at.selectbox(key=Explorer.LAYER).set_value(1).run()
    weights = detail_heatmap(at)
    assert weights["value_name"] == "weight" and weights["colours"][0] != [247, 247, 247]
    softmax = heatmap_figure(heatmap_data(weights["values"], labels, causal=True)).data[0]
    assert (softmax.zmin, softmax.zmax, softmax.zmid) == (0.0, 1.0, None)
    assert abs(np.nansum(weights["values"], axis=1) - 1).max() < 1e-4  # softmax rows


def picture_colours(src: str) -> set[tuple[int, int, int]]:
    png = base64.b64decode(src.split(",", 1)[1])
    return {
        tuple(int(x) for x in p)
        for p in np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
    }


def test_a_linear_layers_grid_and_strip_are_signed(allowed):
    """Qwen3-Next's grid: each layer-0 picture reaches the signed scale's end of the sign of
    its largest-magnitude entry (blue -, red +) and holds white; softmax pictures hold no red.
    The token strip of a layer-0 head is the selected query's row of M, sent as signed."""
    at = opened_on(allowed["qwen3_next"])
    path = allowed["qwen3_next"]
    n = detail_heatmap(at)["n_rows"]
    ids = AutoTokenizer.from_pretrained(path)(PROMPT, return_tensors="pt").input_ids[:, :n]
    want = mixing_inside_transformers(path, ids).numpy()
    cells = {
        c["id"]: c["src"] for c in component_data(at, "atlas_head_grid")["cells"] if "src" in c
    }
    blue, white, red = (5, 48, 97), (247, 247, 247), (103, 0, 31)  # RdBu_r: -1, 0, +1
    for head, m in enumerate(want):
        strongest = m.flat[np.abs(m).argmax()]
        colours = picture_colours(cells[f"0.{head}"])
        assert (red if strongest > 0 else blue) in colours and white in colours, head
    n_softmax = AutoConfig.from_pretrained(path).num_attention_heads
    for head in range(n_softmax):
        assert not any(r > b + 20 for r, _, b in picture_colours(cells[f"1.{head}"]))
    strip = component_data(at, "atlas_token_strip")["shaded"]
    head, query = at.selectbox(key=Explorer.HEAD).value, at.selectbox(key=Explorer.TOKEN).value
    row = want[head, query].astype(np.float64)
    row[query + 1 :] = np.nan  # a causal query sees no later key
    np.testing.assert_allclose(strip_weights(at), row, atol=1e-5, rtol=1e-4)
    assert strip["signed"] and (row[: query + 1] < 0).any()
    assert any("mixing, signed: not attention weights" in h.proto.body for h in at.get("html"))
    assert any("Linear-attention layers (0) show their signed" in c.value for c in at.caption)
    assert at.selectbox(key=Explorer.SCALE).disabled and at.selectbox(key=Explorer.RANGE).disabled
    at.selectbox(key=Explorer.LAYER).set_value(1).run()
    assert not at.selectbox(key=Explorer.SCALE).disabled
    assert not component_data(at, "atlas_token_strip")["shaded"]["signed"]


def test_a_linear_layers_extra_value_heads_each_have_a_cell_and_a_view(allowed):
    """Qwen3-Next's linear layer has more value heads (8, each with its own mixing matrix) than
    its softmax layer has heads (4), as the real models do (32 against 16). The grid is as
    wide as the widest layer, the softmax row ends in empty slots, and a head past the softmax
    layers' count opens its own matrix, equal to transformers' delta rule."""
    at = opened_on(allowed["qwen3_next"])
    path = allowed["qwen3_next"]
    config = AutoConfig.from_pretrained(path)
    n_v, n_softmax = config.linear_num_value_heads, config.num_attention_heads
    assert n_v > n_softmax
    grid = component_data(at, "atlas_head_grid")
    assert grid["n_heads"] == n_v and len(grid["cells"]) == 2 * n_v
    by_id = {c["id"]: c for c in grid["cells"]}
    assert all("src" in by_id[f"0.{h}"] for h in range(n_v))
    assert all("src" in by_id[f"1.{h}"] for h in range(n_softmax))
    assert all(
        by_id[f"1.{h}"] == {"id": f"1.{h}", "none": f"layer 1 has {n_softmax} heads"}
        for h in range(n_softmax, n_v)
    )
    assert at.selectbox(key=Explorer.HEAD).options == [str(h) for h in range(n_v)]

    at.selectbox(key=Explorer.HEAD).set_value(n_v - 1).run()
    assert not at.exception
    drawn = detail_heatmap(at)
    n = drawn["n_rows"]
    ids = AutoTokenizer.from_pretrained(path)(PROMPT, return_tensors="pt").input_ids[:, :n]
    want = mixing_inside_transformers(path, ids)[n_v - 1].numpy()
    lower = np.tril(np.ones((n, n), dtype=bool))
    np.testing.assert_allclose(drawn["values"][lower], want[lower], atol=1e-5, rtol=1e-4)

    at.selectbox(key=Explorer.LAYER).set_value(1).run()  # a softmax layer: 4 heads only
    assert not at.exception
    assert at.selectbox(key=Explorer.HEAD).value == n_softmax - 1
    assert at.selectbox(key=Explorer.HEAD).options == [str(h) for h in range(n_softmax)]
    assert abs(np.nansum(detail_heatmap(at)["values"], axis=1) - 1).max() < 1e-4


def test_compare_mode_leaves_a_linear_layer_out_and_says_so(allowed):
    """Compare mode on Qwen3-Next: the linear layer's heads have no softmax rows, so they are
    empty slots in the divergence grid and absent from the ranking (never a 0 that would read
    "unchanged"), and opening one says why; the softmax layer is compared as usual."""
    at = opened_on(allowed["qwen3_next"])
    at.selectbox(key=Explorer.HEAD).set_value(1).run()
    at.segmented_control(key=Explorer.MODE).set_value("compare").run()
    at.text_area(key=Explorer.PROMPT_B).set_value(PROMPT.replace("model", "house")).run()
    assert not at.exception
    cells = component_data(at, "atlas_head_grid")["cells"]
    n_heads = AutoConfig.from_pretrained(allowed["qwen3_next"]).num_attention_heads
    assert [c["id"] for c in cells if "none" in c] == [f"0.{h}" for h in range(n_heads)]
    assert all(float(c["title"].split()[-2]) >= 0 for c in cells if "none" not in c)
    assert any("Layer 0 is linear attention" in i.value for i in at.info)
    assert "its heads are not compared" in texts(at)
    ranked = at.dataframe[0].value
    assert not ranked.empty and set(ranked["L.H"].str.split(".").str[0]) == {"1"}


def test_the_head_table_has_each_heads_sink_logit_and_window_edge(allowed):
    """gpt-oss on the Head finder: the table's sink logits are the model's own ``sinks``
    parameters, and the learned-sink and window-edge columns are filled (edge: the sliding
    layer 0 only)."""
    at = opened_on(allowed["gpt_oss"])
    at.switch_page("pages/heads.py").run()
    assert not at.exception
    table = at.dataframe[0].value
    want = np.stack(
        [layer.self_attn.sinks.detach().numpy() for layer in eager(allowed["gpt_oss"]).model.layers]
    )
    np.testing.assert_allclose(table["sink_logit"].to_numpy(), want.ravel(), atol=1e-6)
    assert (table["learned_sink"] > 0).all()
    edge = table.set_index("layer")["window_edge"]
    assert edge.loc[0].notna().all() and edge.loc[1].isna().all()


@pytest.mark.parametrize(
    ("name", "marks"),
    [("gpt_oss", ["W6", "G"]), ("qwen3_next", ["lin", "G"]), ("gemma2", ["W6", "G"])],
)
def test_the_grid_marks_each_layers_kind_and_window(allowed, name, marks):
    """Each layer's row of the grid is marked as the model's own config types it (window 6
    where ``layer_types`` says sliding, lin for linear attention); a plain model's grid has no
    marks."""
    at = opened_on(allowed[name])
    config = AutoConfig.from_pretrained(allowed[name])
    types = [str(t) for t in config.layer_types]
    assert [("W6" if "sliding" in t else "lin" if "linear" in t else "G") for t in types] == marks
    layers = component_data(at, "atlas_head_grid")["layers"]
    assert [row["mark"] for row in layers] == marks
    assert all(row["title"].startswith(f"layer {i}: ") for i, row in enumerate(layers))
    assert any("W and a number a sliding window" in c.value for c in at.caption)
    plain = open_app(model="bundled", prompt=PROMPT)
    assert component_data(plain, "atlas_head_grid")["layers"] is None


def test_the_kv_cache_counts_only_global_layers_as_growing(allowed):
    """Gemma 3 (five sliding layers to one global): the page states that only the global
    layer grows, and after a generation its layer-by-layer count equals the bytes read from the
    real cache (by hand: every token on the global layer, window − 1 on each sliding one)."""
    at = opened_on(allowed["gemma3"])
    at.switch_page("pages/generate.py").run()
    at.number_input(key=Generate.MAX_NEW).set_value(4).run()
    at.button(key=Generate.GO).click().run()
    assert not at.exception
    said = texts(at)
    assert "This model has 1 global layer, 5 sliding-window layers" in said
    found = re.search(r"\*\*([0-9,]+) bytes\*\* for ([0-9,]+) tokens", said)
    assert found, said[-1500:]
    measured, tokens = (int(g.replace(",", "")) for g in found.groups())
    per_layer = 2 * 2 * 16 * 4  # K and V, 2 key/value heads, d_head 16, float32
    assert measured == per_layer * (tokens + 5 * 5) and "they are equal" in said


def test_a_gated_heads_output_gate_is_a_strip_of_its_own(allowed):
    """Qwen3-Next's gated softmax layer: a second strip holds the head's gate at every query,
    equal to the model's own sigmoid gate (mean over its dimensions); a click there selects the
    query; the sink line says how much of the sink the gates pass on."""
    path = allowed["qwen3_next"]
    at = opened_on(path)
    at.selectbox(key=Explorer.LAYER).set_value(1).run()
    head = at.selectbox(key=Explorer.HEAD).value
    strips = component_data_all(at, "atlas_token_strip")
    assert len(strips) == 2 and strips[1]["shaded"]["verb"] == "output gate at this query"
    ids = AutoTokenizer.from_pretrained(path)(PROMPT, return_tensors="pt").input_ids
    assert ids.shape[1] == len(strip_weights(at, 1))  # this bridge puts no BOS first
    want = hf_gate(path, ids, 1, 4)[head].double().numpy()
    np.testing.assert_allclose(strip_weights(at, 1), want, atol=1e-5)
    assert "Output gate of head 1." in texts(at)
    assert "Through the output gates it passes on" in texts(at)
    layer0 = opened_on(path)  # the linear layer has no gate: one strip
    assert len(component_data_all(layer0, "atlas_token_strip")) == 1


@pytest.mark.parametrize("name", OPENED)
def test_every_variant_opens_value_weighted(allowed, name):
    """The value-weighted view of each variant draws its heatmap with rows that sum to 1 (or
    to 0 where a head writes nothing), where Qwen3-Next (a linear layer 0 has no values) and
    DeepSeek-V3 (its values come head first) used to end in an error box."""
    at = opened_on(allowed[name])
    at.selectbox(key=Explorer.LAYER).set_value(1).run()
    at.toggle(key=Explorer.WEIGHTED).set_value(True).run()
    assert not at.exception and "Something went wrong" not in texts(at)
    drawn = detail_heatmap(at)
    sums = np.nansum(drawn["values"][:, drawn["pinned"] :], axis=1)
    assert np.all((np.abs(sums - 1) < 1e-4) | (sums == 0)) and (sums > 0).any()


def test_the_value_weighted_view_includes_each_querys_output_gate(allowed):
    """Qwen3-Next's gated layer, value-weighted: the detail heatmap and the strip equal
    ``A[i, j] ||(g_i ⊙ v_j) W_O||`` renormalised, built from transformers' eager attention, its
    values, q projection and o_proj in the test; the page says the gate is included and that
    the linear layer stays unweighted."""
    path = allowed["qwen3_next"]
    at = opened_on(path)
    at.selectbox(key=Explorer.LAYER).set_value(1).run()
    at.selectbox(key=Explorer.TOKEN).set_value(12).run()
    at.toggle(key=Explorer.WEIGHTED).set_value(True).run()
    assert not at.exception
    head = at.selectbox(key=Explorer.HEAD).value
    ids = AutoTokenizer.from_pretrained(path)(PROMPT, return_tensors="pt").input_ids
    want = hf_value_weighted(path, ids, 1)[head]
    drawn = detail_heatmap(at)
    n = drawn["n_rows"]
    shown = drawn["values"][:, drawn["pinned"] :]
    seen = ~np.isnan(shown)
    np.testing.assert_allclose(shown[seen], want[:n, :n][seen], atol=1e-5)
    np.testing.assert_allclose(strip_weights(at)[:13], want[12, :13], atol=1e-5)
    plain = hf_attentions(path, ids)[0][0, head].double().numpy()  # its one softmax layer
    assert np.abs(want - plain).max() > 0.01  # weighting moved the weights
    said = " ".join(c.value for c in at.caption)
    assert "Gated layers (1)" in said and "Linear-attention layers (0)" in said


def test_the_classroom_shows_raw_and_capped_scores_and_a_learned_sink(allowed):
    """Gemma 2 in the classroom's real-head steps: the raw scaled scores, then the capped ones
    the softmax reads, agreeing with the model's own hooks; gpt-oss: a sink column."""
    at = opened_on(allowed["gemma2"])
    at.switch_page("pages/classroom.py").run()
    open_classroom_tab(at, "Inside the model")
    at.run()
    assert not at.exception
    said = texts(at)
    assert "raw scaled scores" in said and "5 · tanh(S / 5)" in said, said[-2000:]
    assert any("agree with the model's own" in s.value for s in at.success)
    oss = opened_on(allowed["gpt_oss"])
    oss.switch_page("pages/classroom.py").run()
    open_classroom_tab(oss, "Inside the model")
    oss.run()
    assert "has a learned sink (logit" in texts(oss)
    assert any("agree with the model's own" in s.value for s in oss.success)
