"""AppTest: the head finder page over a corpus, on the shipped models."""

import json
import re
from urllib.parse import parse_qs, urlparse

import numpy as np
from streamlit.testing.v1 import AppTest

from models.heads.names import COLUMN_HELP, COLUMN_LABELS
from models.heads.table import Thresholds
from tests.app.helpers import APP, operator_settings, texts
from ui.keys import Heads
from ui.state.heads import HeadsView

PAGE = "pages/heads.py"


def open_with_state(model: str, prompt: str | None = None, **view) -> AppTest:
    """The page with its view preset (``view``: HeadsView's fields): after ``switch_page``
    AppTest's tree has no sidebar widgets, so a widget rerun would drop the sidebar's model
    and prompt."""
    state = {Heads.VIEW: HeadsView(**view)}
    operator_settings()
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["model"] = model
    if prompt is not None:
        at.query_params["prompt"] = prompt
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page(PAGE)
    at.run()
    return at


def downloads(at) -> dict:
    return {el.proto.label: el for el in at.get("download_button")}


def test_page_runs_over_the_bundled_corpus_with_pruning(bundled):
    at = open_with_state("bundled", texts=12)
    assert not at.exception
    table = at.dataframe[0].value
    n = bundled.facts.n_total_heads
    assert len(table) == n
    assert {
        "zero_ablation_dloss",
        "grad_importance",
        "first_order_dloss",
        "zero_ablation_dloss_se",
        "sink_lower",
        "sink_spread",
    } <= set(table)
    assert table["open"].str.contains("layer=").all()
    said = texts(at)
    assert "held-out split" in said and "over 12 texts" in said
    assert "next-token cross-entropy, mean over" in said and "what each attention head does" in (
        said.lower()
    )
    assert {"Download the prune list (JSON)", "Download all scores (CSV)"} <= set(downloads(at))
    metric = next(m for m in at.metric if m.label.startswith("Sink"))
    assert metric.value == f"{int((table['sink_lower'] > 0.3).sum())} / {n}"
    assert (table.loc[table["L.H"] == "0.3", "flags"].iloc[0]).startswith("Previous token")


def test_every_table_column_has_a_header_and_a_tooltip(bundled):
    at = open_with_state("bundled", texts=4, ablate=False)
    table = at.dataframe[0].value
    for column in table.columns:
        if column != "open":
            assert column in COLUMN_LABELS and column in COLUMN_HELP, column
            assert COLUMN_LABELS[column] != column or column == "L.H", column


def test_sink_threshold_is_judged_on_the_lower_bound(bundled):
    at = open_with_state("bundled", thresholds=Thresholds(sink=0.0), ablate=False, texts=6)
    assert not at.exception
    table = at.dataframe[0].value
    metric = next(m for m in at.metric if m.label.startswith("Sink"))
    n = bundled.facts.n_total_heads
    assert metric.value == f"{int((table['sink_lower'] > 0.0).sum())} / {n}"
    assert table["sink_flag"].tolist() == (table["sink_lower"] > 0.0).tolist()
    assert "zero_ablation_dloss" not in table  # pruning switched off
    assert (table["sink_lower"] <= table["sink"]).all()


def test_sidebar_prompt_as_the_corpus_has_no_spread(bundled):
    at = open_with_state("bundled", corpus="prompt", ablate=False)
    assert not at.exception
    table = at.dataframe[0].value
    assert (table["previous_token_spread"] == "one text").all()
    np.testing.assert_array_equal(table["previous_token_lower"], table["previous_token"])
    assert "over 1 text" in texts(at)


def test_top_examples_link_into_the_explorer_on_their_text(bundled):
    at = open_with_state("bundled", texts=6, ablate=False, example_score="previous_token")
    examples = at.dataframe[1].value
    assert len(examples) == 8 and examples["weight"].is_monotonic_decreasing
    first = parse_qs(urlparse(examples["open"].iloc[0]).query)
    assert first["model"] == ["bundled"] and first["layer"] == ["0"] and first["head"] == ["3"]
    assert int(first["token"][0]) > 0 and len(first["prompt"][0]) <= 2000
    assert examples["weight"].iloc[0] > 0.9  # head 0.3 is the previous-token head


def test_build_and_download_a_pruned_checkpoint(bundled, tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_CACHE", str(tmp_path))
    at = open_with_state("bundled", texts=4, budget=256, prune_k=2)
    assert not at.exception
    label = at.button(key=Heads.EXPORT).label
    size = float(
        re.search(r"float32: about ([\d,]+) MB, and as much again for its zip", label)[1].replace(
            ",", ""
        )
    )
    assert abs(size - 4 * bundled.facts.n_params / 1024**2) <= 2  # the checkpoint's float32
    at.button(key=Heads.EXPORT).click().run()
    assert not at.exception
    said = texts(at)
    assert "2 heads pruned" in said and "Masked" in said and "Local directory" in said
    assert str(tmp_path) not in said  # no server path reaches the page
    labels = {m.label for m in at.metric}
    assert {
        "Loss on the corpus",
        "Parameters stored",
        "Forward-pass time, after / before",
    } <= labels
    stored = next(m for m in at.metric if m.label == "Parameters stored")
    assert stored.delta == "none removed: the heads are masked"  # GPT-2's heads: masked in place
    assert stored.proto.direction == stored.proto.MetricDirection.NONE  # no red arrow up for +0
    assert "Download the pruned checkpoint (zip)" in downloads(at)
    written = list((tmp_path / "pruned").iterdir())
    assert any((p / "model.safetensors").is_file() for p in written)


def test_page_runs_for_minilm_and_says_the_loss_is_unavailable():
    at = open_with_state("minilm", texts=3)
    assert not at.exception
    said = texts(at)
    assert "Not available for all-MiniLM-L6-v2" in said and "no causal mask" in said
    table = at.dataframe[0].value
    assert len(table) == 6 * 12 and "zero_ablation_dloss" not in table
    assert "Download all scores (CSV)" in downloads(at)


def test_empty_prompt_gives_a_message_not_a_traceback():
    at = open_with_state("minilm", prompt="   ", corpus="prompt")
    assert not at.exception
    assert "prompt is empty" in texts(at)


def test_pruning_says_what_its_switch_does_while_it_is_off(bundled):
    at = open_with_state("bundled", texts=4, ablate=False)
    assert not at.exception and not at.toggle(key=Heads.ABLATE).value
    assert "Turn it on to rank every head by its importance" in texts(at)
    assert not any(c.value.startswith("next-token cross-entropy") for c in at.caption)


def test_the_examples_table_fits_the_page_at_1280_px(bundled):
    """Every column of "Where a head fires" has its width set, and together they fit the 818 px
    the main column has at 1,280 px with the sidebar open (measured in Chromium), borders
    included, so no token or context is cut and nothing scrolls sideways."""
    at = open_with_state("bundled", texts=4)
    columns = json.loads(at.dataframe[-1].proto.columns)
    columns.pop("_index")  # hidden
    assert list(columns) == ["weight", "text", "query", "key", "context", "open"]
    widths = [c["width"] for c in columns.values()]
    assert all(isinstance(w, int) for w in widths) and sum(widths) + 2 * len(widths) <= 818
