"""AppTest: the Circuits page's attribution patching, path patching, circuit graph and weights
tabs on the bundled model (copying task), each checked against the core called directly; and
what an encoder gets."""

import base64
import json
from dataclasses import replace

import numpy as np
import pytest

from models.circuits import (
    agreement,
    attribution_patching,
    attribution_runs,
    baseline,
    composition,
    copying_task,
    edge_estimates,
    graph_from_estimates,
    head_effects,
    path_loadings,
    path_patching,
    prepare,
    weight_scores,
)
from models.head import Head
from tests.app.helpers import open_app, texts
from ui.keys import Circuits
from ui.state.circuits import PathRequest

PAGE = "pages/circuits.py"


@pytest.fixture(scope="module")
def page(bundled):
    """The page opened once on the bundled model; each test moves its state."""
    at = open_app(PAGE, model="bundled")
    assert not at.exception
    return at


@pytest.fixture(scope="module")
def setup(bundled):
    return prepare(bundled, copying_task(bundled))


def show(at, **changes):
    at.session_state[Circuits.STATE] = replace(at.session_state[Circuits.STATE], **changes)
    at.run()
    assert not at.exception
    return at


def frame(at, column):
    """The dataframe that has ``column``."""
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def figures(at):
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def numbers(data) -> np.ndarray:
    """A figure's array as plotly serialises it (a list, or base64 typed data)."""
    if isinstance(data, dict):
        flat = np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"])
        shape = data.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")]) if shape else flat
    return np.array(data, dtype=float)


def titled(at, text):
    """The one figure titled ``text`` (or, failing that, whose title contains it): the weights
    tab also draws "OV copying score against …" once the head finder's scores are stored."""
    titles = [(f, f["layout"].get("title", {}).get("text", "")) for f in figures(at)]
    found = [f for f, title in titles if title == text] or [f for f, t in titles if text in t]
    assert len(found) == 1, [title for _, title in titles]
    return found[0]


def test_the_atp_table_and_scatter_are_attribution_patching_against_exact(page, bundled, setup):
    at = show(page, tab="atp")
    expected = attribution_patching(bundled, setup, qk_fix=True)
    table = frame(at, "atp_star").sort_values(["layer", "head"])
    for column, values in (
        ("atp", expected.z),
        ("atp_star", expected.z_star),
        ("q", expected.q),
        ("q_star", expected.q_star),
    ):
        np.testing.assert_allclose(table[column].to_numpy(), values.ravel(), atol=1e-6)
    np.testing.assert_allclose(
        table["k_star"].to_numpy(),
        np.repeat(expected.k_star, expected.group, axis=1).ravel(),
        atol=1e-6,
    )
    assert table["saturated"].tolist() == expected.saturated.ravel().tolist()
    exact = head_effects(bundled, setup, baseline(bundled, setup))
    np.testing.assert_allclose(table["patch_effect"].to_numpy(), exact.ravel(), atol=1e-5)
    found = agreement(expected.z_star, exact, expected.saturated)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Pearson"] == f"{found.pearson:.3f}"
    assert metrics[f"Top-{found.k} recall"] == f"{found.recall:.2f}"
    scatter = titled(at, "AtP* against exact patching")["data"][0]
    np.testing.assert_allclose(numbers(scatter["y"]), expected.z_star.ravel(), atol=1e-6)
    worst = frame(at, "gap")
    assert worst["L.H"].tolist() == [str(w.head) for w in found.worst]
    said = texts(at)
    assert "QK fix: under +0.1 s" in said and "GradDrop: +1 backward pass" in said
    shown = next(d for d in at.dataframe if "atp_star" in d.value.columns).proto.column_order
    assert "checked" not in shown and "patch_effect" in shown  # nothing shown as "None"


def test_path_patching_of_a_chosen_receiver_is_path_patching(page, bundled, setup):
    request = PathRequest(Head(2, 1), "k", "direct")
    at = show(page, tab="paths", path=request)
    expected = path_patching(bundled, setup, Head(2, 1), "k", mlps="direct")
    grid = titled(at, "Path effect of each sender on 2.1 through its k")["data"][0]
    np.testing.assert_allclose(numbers(grid["z"]), expected.effects, atol=1e-6)
    senders = frame(at, "path effect")
    for label, value in zip(senders["sender"], senders["path effect"], strict=True):
        assert value == pytest.approx(expected.effects[Head.parse(label)], abs=1e-6)
    assert "frozen too" in texts(at)


def test_a_path_result_closes_its_sum_by_patching_the_whole_input(page, bundled, setup):
    """The senders' parts against the whole input patched once (the core's split is checked
    against plain PyTorch in tests/circuits/test_loadings.py; this is the page's wiring)."""
    at = show(page, tab="paths", path=PathRequest(Head(2, 2), "k", "direct"))
    at.button(key=Circuits.RUN_PATH_LOADINGS).click().run()
    assert not at.exception
    result = path_patching(bundled, setup, Head(2, 2), "k", mlps="direct")
    expected = path_loadings(bundled, setup, result)
    said = texts(at)
    assert f"path k of 2.2: {expected.total:+.4f} of the gap" in said, said[-800:]
    assert f"Earlier heads carry {expected.heads.sum():+.4f}" in said
    assert f"the rest {expected.remainder:+.4f}" in said


def test_a_path_no_sender_reaches_says_so_and_names_the_other_inputs(page, bundled, setup):
    request = PathRequest(Head(2, 2), "q", "recomputed")
    at = show(page, tab="paths", path=request)
    expected = path_patching(bundled, setup, Head(2, 2), "q", mlps="recomputed")
    largest = float(np.abs(expected.effects).max())
    said = texts(at)
    assert (
        f"No sender reaches 2.2 through its q on this task: the largest |path effect| is "
        f"{largest:.4f}"
    ) in said
    assert "try its k or its v" in said
    at = show(page, tab="paths", path=replace(request, input="k"))
    assert "No sender reaches" not in texts(at)  # the previous-token head feeds 2.2's keys


def test_the_graph_draws_the_edge_estimates_above_the_threshold(page, bundled, setup):
    at = show(page, tab="paths", graph_source="estimates", threshold=0.05)
    dla = baseline(bundled, setup).attribution.heads
    runs = attribution_runs(bundled, setup, qk_fix=True)
    graph = graph_from_estimates(edge_estimates(bundled, runs, setup), dla).above(0.05)
    assert (
        0
        < len(graph.edges)
        < len(graph_from_estimates(edge_estimates(bundled, runs, setup), dla).edges)
    )
    shown = frame(at, "open receiver")
    assert list(zip(shown["sender"], shown["receiver"], shown["input"], strict=True)) == [
        (str(e.sender), str(e.receiver), e.input) for e in graph.edges
    ]
    np.testing.assert_allclose(shown["weight"], [e.weight for e in graph.edges], atol=1e-6)
    figure = titled(at, "Circuit graph")
    assert f"{len(graph.edges)} edges with |effect| ≥ 0.05" in figure["layout"]["title"]["text"]
    nodes = figure["data"][-1]
    assert nodes["customdata"][:2] == ["0.0", "0.1"]  # a click names the head
    assert "strongest edges end at" in texts(at)
    picked = graph.edges[0].receiver
    assert at.selectbox(key=Circuits.GRAPH_NODE).value == picked
    first = next(e for e in graph.edges if e.receiver == picked)  # the strongest into it
    assert f"Head {picked}: into it from {first.sender} ({first.input}) {first.weight:+.3g}" in (
        texts(at)
    )


def test_the_weights_panel_is_weight_scores_and_composition(page, bundled):
    at = show(page, tab="weights", composition="v", composition_receiver=Head(2, 2))
    scores = weight_scores(bundled)
    grid = titled(at, "OV copying score")["data"][0]
    np.testing.assert_allclose(numbers(grid["z"]), scores.copying, atol=1e-9)
    pairs = composition(bundled)
    heat = titled(at, "V-composition of each sender into 2.2")["data"][0]
    want = pairs.v[:, 2 * 4 + 2].reshape(3, 4)
    got = numbers(heat["z"])
    np.testing.assert_allclose(got[:2], want[:2], atol=1e-9)
    assert np.isnan(got[2]).all()  # the receiver's own layer cannot compose into it
    assert heat["zmin"] == 0.0 and heat["zmax"] == pytest.approx(np.nanmax(want))
    assert heat["colorscale"][0][1] == "rgb(247,251,255)"  # sequential: white at 0
    top = frame(at, "V")
    assert top["V"].iloc[0] == pytest.approx(np.nanmax(pairs.v))
    assert "token basis" in texts(at)


def test_an_encoder_explains_each_task_tab_and_reads_its_weights(minilm):
    at = open_app(PAGE, model="minilm")
    assert not at.exception
    for tab in ("atp", "paths"):
        show(at, tab=tab)
        assert any("causal" in str(w.value) for w in at.warning), tab
    assert "no graph from" in texts(show(at, tab="paths")).lower()
    at = show(at, tab="weights")
    assert "residual basis" in texts(at)
    grid = titled(at, "OV copying score")["data"][0]
    np.testing.assert_allclose(numbers(grid["z"]), weight_scores(minilm).copying, atol=1e-9)
