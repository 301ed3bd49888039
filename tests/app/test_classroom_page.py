"""AppTest: the classroom page shows the worked examples' values and handles bad input.

AppTest drops the sidebar's widgets after ``switch_page`` (their state is not carried to the next
rerun), so :func:`rerun` puts the sidebar's model and prompt back before every rerun. Only the
open tab runs; :func:`rerun` opens the one a test looks at.
"""

import html
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.helpers import open_classroom_tab, operator_settings
from ui.keys import Classroom, Sidebar

ROOT = Path(__file__).resolve().parents[2]
PAGE = "pages/classroom.py"


STEPS_TAB, MODEL_TAB, COST_TAB = "Step by step", "Inside the model", "Cost"
SIDEBAR = {
    Sidebar.SOURCE: "minilm",
    Sidebar.PROMPT: "The quick brown fox jumps over the lazy dog. The quick brown fox",
}


def rerun(at, tab: str | None = None, **sidebar):
    for key, value in {**SIDEBAR, **sidebar}.items():
        at.session_state[key] = value
    if tab is not None:
        open_classroom_tab(at, tab)
    at.run()
    assert not at.exception, at.exception
    return at


def open_page(**sidebar):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params["model"] = "minilm"
    at.run()
    at.switch_page(PAGE)
    return rerun(at, **sidebar)


def tables(at) -> dict[str, list[list[str]]]:
    """Every labelled matrix on the page: caption -> rows of displayed cell texts."""
    found = {}
    for md in at.markdown:
        text = md.value
        if 'class="classroom-matrix"' not in text:
            continue
        caption = html.unescape(re.search(r"<caption[^>]*>(.*?)</caption>", text).group(1))
        rows = [
            [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", text)
        ]
        found[caption] = [r for r in rows if r]
    return found


@pytest.fixture(scope="module")
def page():
    return open_page()


def test_example_a_values_are_displayed(page):
    t = tables(page)
    assert t["S = Q Kᵀ"] == [["2.000", "3.000"], ["0.000", "-1.000"]]
    assert t["S / √2"] == [["1.414", "2.121"], ["0.000", "-0.707"]]
    assert t["A = softmax(S / √2)"] == [["0.330", "0.670"], ["0.670", "0.330"]]
    assert t["A V (one output row per query)"] == [["23.40", "33.40"], ["16.60", "26.60"]]
    assert not page.error


def test_real_model_section_agrees_with_the_model(page):
    rerun(page, tab=MODEL_TAB)
    assert any(
        "agree with the model's own" in s.value and "hook_pattern" in s.value for s in page.success
    )
    t = tables(page)
    weights = next(rows for cap, rows in t.items() if cap.startswith("A = softmax (over"))
    assert len(weights) == 8  # the first 8 tokens of the sidebar prompt


def test_example_b_button_and_causal_toggle():
    at = open_page()
    at.button(key=Classroom.EXAMPLE_B).click()
    rerun(at)
    assert at.text_area(key=Classroom.matrix("q")).value == "1, 0; 0, 1; 1, 1"
    t = tables(at)
    assert t["S / √2"] == [
        ["0.707", "0.000", "0.707"],
        ["0.000", "0.707", "0.707"],
        ["0.707", "0.707", "1.414"],
    ]
    at.toggle(key=Classroom.CAUSAL).set_value(True)
    rerun(at)
    t = tables(at)
    assert t["masked scores"][0] == ["0.707", "−∞", "−∞"]
    assert t["A = softmax(S / √2)"][0] == ["1.000", "0.000", "0.000"]
    assert t["A = softmax(S / √2)"][1] == ["0.330", "0.670", "0.000"]
    assert "the same rows without the mask" in t
    at.button(key=Classroom.EXAMPLE_A).click()
    rerun(at)
    assert tables(at)["A V (one output row per query)"] == [["10.00", "20.00"], ["16.60", "26.60"]]


@pytest.mark.parametrize(
    "key, text, message",
    [
        (Classroom.matrix("q"), "1, x; 0, -1", "`x` is not a number"),
        (Classroom.matrix("q"), "; ".join([", ".join(["1"] * 7)] * 7), "at most 6 × 6"),
        (Classroom.matrix("q"), "1, 2, 3; 0, 1, 2", "Q has 3 columns but K has 2"),
        (Classroom.matrix("v"), "1, 2", "K has 2 rows but V has 1"),
        (Classroom.matrix("k"), "2, 0; 1", "row 2 has 1 number but"),
    ],
)
def test_invalid_matrices_give_a_clear_message(page, key, text, message):
    rerun(page, tab=STEPS_TAB)
    page.text_area(key=key).set_value(text)
    rerun(page)
    assert any(message in e.value for e in page.error), [e.value for e in page.error]
    assert page.text_area(key=key).value == text  # the typed text is kept
    page.button(key=Classroom.EXAMPLE_A).click()
    rerun(page)
    assert not page.error


def test_typed_text_survives_a_page_switch_and_empty_prompt_keeps_maths():
    at = open_page()
    at.text_area(key=Classroom.matrix("v")).set_value("1, 0; 0, 1")
    rerun(at, **{Sidebar.PROMPT: "   "})  # the edit lands while its tab is open, as in a browser
    rerun(at, tab=MODEL_TAB, **{Sidebar.PROMPT: "   "})
    assert any("prompt is empty" in i.value for i in at.info)
    rerun(at, tab=STEPS_TAB, **{Sidebar.PROMPT: "   "})
    assert tables(at)["A V (one output row per query)"] == [["0.33", "0.67"], ["0.67", "0.33"]]
    at.switch_page("pages/explorer.py")
    rerun(at)
    assert not tables(at)
    at.switch_page(PAGE)
    rerun(at)
    assert at.text_area(key=Classroom.matrix("v")).value == "1, 0; 0, 1"


def test_cost_section_shows_kv_cache_for_the_preset(page):
    rerun(page, tab=COST_TAB)
    page.selectbox(key=Classroom.COST_PRESET).set_value("Llama-2-7B-like (MHA)")
    rerun(page)
    metrics = {m.label: m.value for m in page.metric}
    assert metrics["KV cache per token"] == "512.00 KiB"
    assert metrics["KV cache, batch 1 × 4,096 tokens"] == "2.00 GiB"


def test_maths_sections_render_when_no_model_loads(monkeypatch):
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", "/nonexistent")  # allowed, but there is nothing
    operator_settings()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params["model"] = "/nonexistent/classroom-model"
    at.run()
    at.switch_page(PAGE)
    state = {Sidebar.SOURCE: "local", Sidebar.NAME: "/nonexistent/classroom-model"}
    rerun(at, tab=MODEL_TAB, **state)
    assert any("No directory" in e.value for e in at.error)
    assert any("No model is loaded" in i.value for i in at.info)
    rerun(at, tab=STEPS_TAB, **state)
    assert tables(at)["A = softmax(S / √2)"] == [["0.330", "0.670"], ["0.670", "0.330"]]
    rerun(at, tab=COST_TAB, **state)
    assert at.selectbox(key=Classroom.COST_PRESET).value == "Llama-2-7B-like (MHA)"


def test_real_model_window_follows_the_controls(page):
    rerun(page, tab=MODEL_TAB)
    page.number_input(key=Classroom.START).set_value(3)
    page.slider(key=Classroom.WIDTH).set_value(2)
    rerun(page)
    t = tables(page)
    scores = next(rows for cap, rows in t.items() if cap.startswith("Q Kᵀ / √32"))
    assert len(scores) == 2 and len(scores[0]) == 2
    head = next(md.value for md in page.markdown if "Q Kᵀ / √32" in md.value)
    assert "(3) brown" in head and "(4) fox" in head


def test_editing_a_size_switches_to_custom_and_updates_the_cache(page):
    rerun(page, tab=COST_TAB)
    page.selectbox(key=Classroom.COST_PRESET).set_value("Llama-2-7B-like (MHA)")
    rerun(page)
    page.number_input(key=Classroom.config("n_kv_heads")).set_value(8)
    rerun(page)
    assert page.selectbox(key=Classroom.COST_PRESET).value.startswith("Custom")
    metrics = {m.label: m.value for m in page.metric}
    assert metrics["KV cache per token"] == "128.00 KiB"  # a quarter of 512 KiB
    page.number_input(key=Classroom.config("n_kv_heads")).set_value(5)
    rerun(page)
    assert any("cannot be split evenly" in e.value for e in page.error)


def test_the_first_tab_shows_without_running_the_model(monkeypatch):
    """Opening the classroom runs no forward pass: the model tab runs only when opened."""
    import models.classroom.real

    calls = []
    original = models.classroom.real.layer_activations
    monkeypatch.setattr(
        models.classroom.real,
        "layer_activations",
        lambda *args, **kw: calls.append(1) or original(*args, **kw),
    )
    at = open_page(**{Sidebar.PROMPT: "A prompt only this classroom test runs."})
    assert tables(at)["A = softmax(S / √2)"] == [["0.330", "0.670"], ["0.670", "0.330"]]
    assert not calls
    rerun(at, tab=MODEL_TAB, **{Sidebar.PROMPT: "A prompt only this classroom test runs."})
    assert calls
