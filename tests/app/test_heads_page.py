"""AppTest: the head finder page on the two shipped models."""

from streamlit.testing.v1 import AppTest

from tests.app.helpers import APP, open_app, texts

PAGE = "pages/heads.py"


def open_with_state(model: str, **state) -> AppTest:
    """The page with session values preset: after ``switch_page`` AppTest's tree has no
    sidebar widgets, so a widget rerun would drop the sidebar's model and prompt."""
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params["model"] = model
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page(PAGE)
    at.run()
    return at


def downloads(at) -> dict:
    return {el.proto.label: el for el in at.get("download_button")}


def test_page_runs_for_the_bundled_model_with_pruning(bundled):
    at = open_app(PAGE, model="bundled")
    assert not at.exception
    table = at.dataframe[0].value
    n = bundled.facts.n_total_heads
    assert len(table) == n
    assert {"zero_ablation_dloss", "mean_ablation_dloss", "grad_importance"} <= set(table)
    assert table["open"].str.contains("layer=").all()
    said = texts(at)
    assert "Sink rate" in said and "next-token cross-entropy" in said
    assert {"Download the prune list (JSON)", "Download all scores (CSV)"} <= set(downloads(at))
    metric = next(m for m in at.metric if m.label.startswith("Sink"))
    assert metric.value == f"{int((table['sink'] > 0.3).sum())} / {n}"


def test_sink_threshold_slider_changes_the_flags(bundled):
    at = open_with_state("bundled", heads_th_sink=0.0, heads_ablate=False)
    assert not at.exception
    metric = next(m for m in at.metric if m.label.startswith("Sink"))
    n = bundled.facts.n_total_heads
    assert metric.value == f"{n} / {n}"  # eps 0: every head puts some weight on token 0
    assert at.dataframe[0].value["sink_flag"].all()
    assert "zero_ablation_dloss" not in at.dataframe[0].value  # pruning switched off


def test_page_runs_for_minilm_and_says_the_loss_is_unavailable():
    at = open_app(PAGE, model="minilm")
    assert not at.exception
    said = texts(at)
    assert "Not available for all-MiniLM-L6-v2" in said and "no causal mask" in said
    table = at.dataframe[0].value
    assert len(table) == 6 * 12 and "zero_ablation_dloss" not in table
    assert "Download all scores (CSV)" in downloads(at)


def test_empty_prompt_gives_a_message_not_a_traceback():
    at = open_app(PAGE, model="minilm", prompt="   ")
    assert not at.exception
    assert "prompt is empty" in texts(at)
