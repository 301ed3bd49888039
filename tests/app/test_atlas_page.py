"""AppTest: the Head atlas page on the bundled model, a few short texts."""

import base64
import io

import numpy as np
import plotly.io
from PIL import Image
from streamlit.testing.v1 import AppTest

from models.head import Head
from tests.app.helpers import APP, component_data, operator_settings, texts
from ui.keys import HeadAtlas, Sidebar
from ui.state.atlas import AtlasView

PAGE = "pages/atlas.py"


def numbers(value) -> np.ndarray:
    """A figure's array as the browser gets it (plotly sends numpy arrays base64-encoded)."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return np.asarray(value)


def open_atlas(**query) -> AppTest:
    operator_settings()
    at = AppTest.from_file(APP, default_timeout=600)
    at.query_params["model"] = "bundled"
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(PAGE)
    at.run()
    at.number_input(key=HeadAtlas.TEXTS).set_value(4)
    at.number_input(key=HeadAtlas.MAX_TOKENS).set_value(48)
    at.session_state[Sidebar.SOURCE] = "bundled"
    at.run()
    return press_start(at)


def press_start(at: AppTest) -> AppTest:
    """Ask for the atlas (the sidebar's model is set again: AppTest drops it after a switch);
    an atlas already measured shows no button."""
    if any(button.key == HeadAtlas.START for button in at.button):
        at.button(key=HeadAtlas.START).click()
        at.session_state[Sidebar.SOURCE] = "bundled"
        at.run()
    return at


def test_the_map_takes_its_axes_and_head_from_the_link(bundled):
    at = open_atlas(ax="distance", ay="sink", ac="", layer="2", head="1")
    assert not at.exception
    view = at.session_state[HeadAtlas.VIEW]
    assert view == AtlasView("distance", "sink", None, None, Head(2, 1), 4, 48, notes_shown=True)
    said = texts(at)
    assert "Head 2.1" in said and "corpus scores over 4 texts" in said
    figure = plotly.io.from_json(at.get("plotly_chart")[0].proto.spec)
    assert figure.layout.xaxis.title.text == "Distance back (tokens)"
    points = figure.data[0]
    assert len(numbers(points.x)) == 12 and points.customdata[9][0] == "2.1"
    widths = numbers(points.marker.line.width)
    assert widths[9] > widths[0]  # the open head is ringed
    cards = at.dataframe
    quantities = cards[0].value["Quantity"].tolist()
    assert "Entropy" in quantities and "OV copying" in quantities
    samples = cards[1].value
    assert samples["Open"].str.contains("layer=2").all() and len(samples) == 4
    fires = next(m.value for m in at.markdown if m.value.startswith("**Where it fires**"))
    assert fires.lower().count("first key left out") == 1  # the rule said once
    labels = {el.proto.label for el in at.get("download_button")}
    assert "Download the atlas (CSV)" in labels


def test_changing_an_axis_keeps_the_head(bundled):
    at = open_atlas(layer="1", head="3")
    at.selectbox(key=HeadAtlas.X).set_value("activation").run()
    assert not at.exception
    view = at.session_state[HeadAtlas.VIEW]
    assert view.x == "activation" and view.head == Head(1, 3)


def test_each_points_picture_is_sent_once_with_the_map(bundled):
    """The map's hover pictures: one per head, each the head's pooled pattern on the longest
    text (decoded here: its masked cells are the grey the grid uses, above the diagonal), sent
    with the first drawing and not again when only an axis changes."""
    at = open_atlas()
    sent = component_data(at, "atlas_map_pictures")
    assert sent["chart"] == HeadAtlas.MAP and "tokens), max-pooled" in sent["caption"]
    assert sorted(sent["pictures"]) == sorted(f"{l}.{h}" for l in range(3) for h in range(4))
    png = base64.b64decode(sent["pictures"]["0.0"].split(",", 1)[1])
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    assert pixels.shape == (128, 128, 3)
    assert tuple(pixels[0, -1]) != tuple(pixels[-1, 0])  # masked corner against a weight
    at.selectbox(key=HeadAtlas.X).set_value("activation").run()
    again = component_data(at, "atlas_map_pictures")
    assert again["pictures"] is None and again["id"] == sent["id"]


def test_no_card_until_a_head_is_picked(bundled):
    at = open_atlas(ax="nonsense")
    assert not at.exception
    said = texts(at)
    assert "Click a head on the map" in said and "ax='nonsense'" in said


def test_the_atlas_job_names_the_model_in_plain_text(monkeypatch, tmp_path):
    """The job's label is shown through markdown by the job view, which escapes it: the page
    hands it the model's name as it is (escaping twice showed ``gpt\\_oss``)."""
    from tests.attention.tiny_variants import build_variants
    from ui.sections import atlas
    from ui.widgets import job_view

    folder = build_variants(tmp_path, ["gpt_oss"])["gpt_oss"]
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", str(tmp_path))
    labels: list[str] = []
    real = job_view.run_job

    def waiting(key, label, work, **kwargs):
        if not label.startswith("Measuring"):
            return real(key, label, work, **kwargs)
        labels.append(label)
        return job_view.MISSING

    monkeypatch.setattr(atlas.job_view, "run_job", waiting)
    operator_settings()
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params["model"] = str(folder)
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception and not labels  # asked for, not started on arrival
    at.button(key=HeadAtlas.START).click()
    at.session_state[Sidebar.SOURCE], at.session_state[Sidebar.NAME] = "local", str(folder)
    at.run()
    assert not at.exception
    assert labels and labels[0].startswith("Measuring every head of gpt_oss on "), labels


def test_ablation_importance_joins_the_map_when_asked(bundled):
    """Before the button: ablation is "not measured" on the card; after it, the card's zero-
    and mean-ablation values (and their standard errors) are the importance the pruning code
    measures on the same texts, and the map can plot them."""
    from models.heads.finding.corpus import Corpus
    from models.heads.pruning.importance import measure_corpus_importance
    from models.heads.pruning.loss import budget_tasks
    from ui.sections.heads import bundled_corpus

    at = open_atlas(layer="1", head="2", ax="zero_ablation", ay="sink")
    card = at.dataframe[0].value.set_index("Quantity")
    assert "not measured" in str(card.loc["Loss change, zeroed"].tolist())
    at.button(key=HeadAtlas.ABLATE).click()
    at.session_state[Sidebar.SOURCE] = "bundled"
    at.run()
    assert not at.exception
    card = at.dataframe[0].value.set_index("Quantity")
    corpus: Corpus = bundled_corpus(bundled).head(4)
    tasks = budget_tasks(bundled, corpus.texts, 10**9, 48)
    want = measure_corpus_importance(bundled, tasks, ("gradient", "mean", "zero"))
    for label, method in (("Loss change, zeroed", "zero"), ("Loss change, mean-ablated", "mean")):
        row = card.loc[label]
        shown = float(str(row["Value"]).split()[0])  # "0.1048 ± 0.0453 nats/token"
        assert abs(shown - float(want.spreads[method].mean[1, 2])) <= 5e-5
    figure = plotly.io.from_json(at.get("plotly_chart")[0].proto.spec)
    xs = numbers(figure.data[0].x)
    np.testing.assert_allclose(xs[6], want.spreads["zero"].mean[1, 2], atol=1e-6)
    assert "ablation importance on 4 texts" in texts(at)
    assert "ablation importance not measured" not in texts(at)  # replaced, not added to


def test_direct_logit_attribution_comes_from_the_circuits_task_this_session_ran(bundled):
    """Before the Circuits page has run a task the card says where DLA comes from; after it,
    the card and the map hold that task's per-head DLA (the circuits code's own numbers on the
    same task)."""
    from models.circuits import baseline, copying_task, prepare

    at = open_atlas(layer="2", head="2", ax="direct_logit", ay="sink")
    assert "joins the map once a task has run on the Circuits page" in texts(at)
    at.switch_page("pages/circuits.py")
    at.session_state[Sidebar.SOURCE] = "bundled"
    at.run()
    assert not at.exception and "Parts add up to LD" in texts(at)
    at.switch_page(PAGE)
    at.session_state[Sidebar.SOURCE] = "bundled"
    at.run()
    press_start(at)
    assert not at.exception
    want = baseline(bundled, prepare(bundled, copying_task(bundled))).attribution.heads
    card = at.dataframe[0].value.set_index("Quantity")
    shown = float(str(card.loc["Direct logit attribution"]["Value"]).split()[0])
    assert abs(shown - float(want[2, 2])) <= 5e-4 * max(1.0, abs(float(want[2, 2])))
    figure = plotly.io.from_json(at.get("plotly_chart")[0].proto.spec)
    np.testing.assert_allclose(numbers(figure.data[0].x), want.ravel(), atol=1e-6)
    assert "direct logit attribution on the Circuits task" in texts(at)
