"""The explorer page, run headless through Streamlit's AppTest."""

import json

import numpy as np
import pytest

from models.model.spec import BUNDLED_DIR
from tests.app.helpers import component_data, detail_heatmap, has_heatmap, open_app, texts
from ui.keys import Explorer, Sidebar
from ui.widgets import canvas_heatmap


@pytest.mark.parametrize("model", ["bundled", "minilm"])
def test_explorer_renders_heatmap_for_each_model(model):
    at = open_app(model=model)
    assert not at.exception
    assert at.selectbox(key=Explorer.LAYER).value == 0
    labels = detail_heatmap(at)["cols"]
    assert labels[0] == ("(0) <|endoftext|>" if model == "bundled" else "(0) [CLS]")
    assert "layers ×" in texts(at)


def test_link_opens_the_exact_view():
    at = open_app(model="bundled", prompt="one two three four", layer=1, head=2, token=3)
    assert not at.exception
    assert at.selectbox(key=Explorer.LAYER).value == 1
    assert at.selectbox(key=Explorer.HEAD).value == 2
    assert at.selectbox(key=Explorer.TOKEN).value == 3
    assert at.text_area(key=Sidebar.PROMPT).value == "one two three four"
    assert "Head 1.2" in texts(at)


def test_out_of_range_and_garbage_link_values_are_fixed_with_a_note():
    at = open_app(model="bundled", prompt="a b c", layer=99, head="x", token=-5)
    assert not at.exception
    assert (
        at.selectbox(key=Explorer.LAYER).value == len(at.selectbox(key=Explorer.LAYER).options) - 1
    )
    assert at.selectbox(key=Explorer.HEAD).value == 0
    assert at.selectbox(key=Explorer.TOKEN).value == 0
    notes = texts(at)
    assert "layer 99" in notes and "head='x'" in notes.replace('"', "'")


def test_changing_head_updates_heatmap():
    at = open_app(model="bundled", prompt="the cat and the cat")
    before = detail_heatmap(at)["values"]
    at.selectbox(key=Explorer.HEAD).set_value(3).run()
    assert not at.exception
    assert "Head 0.3" in texts(at)
    after = detail_heatmap(at)
    assert not np.array_equal(after["values"], before, equal_nan=True)
    assert after["label"].startswith("Head 0.3:")


def test_empty_prompt_gives_a_message():
    at = open_app(model="bundled")
    at.text_area(key=Sidebar.PROMPT).set_value("   ").run()
    assert not at.exception
    assert "empty" in texts(at)
    assert not has_heatmap(at)


def test_long_prompt_is_cut_with_a_notice():
    at = open_app(model="bundled")
    at.text_area(key=Sidebar.PROMPT).set_value("x = 1\n" * 900).run()  # 5,400 characters
    assert not at.exception
    n_ctx = json.loads((BUNDLED_DIR / "config.json").read_text())["n_positions"]
    assert f"only the first {n_ctx}" in texts(at)
    assert len(detail_heatmap(at)["cols"]) == min(n_ctx, 160)  # a window of a long prompt


def test_unknown_model_keeps_previous_model_working():
    at = open_app(model="bundled", prompt="hello there")
    at.selectbox(key=Sidebar.SOURCE).set_value("hub").run()
    at.text_input(key=Sidebar.NAME).set_value("no-such-user/no-such-model").run()
    assert not at.exception
    said = texts(at)
    assert "Could not find 'no-such-user/no-such-model'" in said
    assert "Still showing the last model that loaded" in said
    assert detail_heatmap(at)["cols"][0] == "(0) <|endoftext|>"
    assert at.text_input(key=Sidebar.NAME).value == "no-such-user/no-such-model"


def test_a_script_prompt_reaches_the_heatmap_as_text_only():
    """The canvas gets labels as plain text and draws them as text; its code never hands a
    string to the HTML parser (the readout goes through textContent)."""
    at = open_app(model="bundled", prompt="<script>alert(1)</script>")
    assert not at.exception
    labels = detail_heatmap(at)["rows"]
    assert any("<" in label for label in labels)  # as typed, not escaped twice
    assert not any("&lt;" in label for label in labels)
    for parser in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
        assert parser not in canvas_heatmap._JS
    assert "tip.textContent" in canvas_heatmap._JS


def test_the_head_is_named_once_and_the_view_survives_a_page_switch():
    at = open_app(model="bundled", layer=2, head=2, token=5)
    assert texts(at).count("Head 2.2") == 1  # the subheader; the figure has no second title
    assert detail_heatmap(at)["title"] == ""
    at.selectbox(key=Explorer.LAYER).set_value(1)
    at.selectbox(key=Explorer.HEAD).set_value(3)
    at.selectbox(key=Explorer.TOKEN).set_value(7)
    at.run()
    at.switch_page("pages/heads.py")
    at.run()
    at.switch_page("pages/explorer.py")
    at.run()
    assert not at.exception
    assert (
        at.selectbox(key=Explorer.LAYER).value,
        at.selectbox(key=Explorer.HEAD).value,
        at.selectbox(key=Explorer.TOKEN).value,
    ) == (1, 3, 7)  # not the link's 2.2 at 5


def test_value_weighted_toggle_redraws_every_view_from_the_weighting():
    import numpy as np
    import torch

    from models.capture.run import capture
    from models.capture.weighted import value_norms, value_weighted
    from models.model.loading import load
    from models.model.spec import ModelSpec

    prompt = "x = 1\nx = 1\n"
    at = open_app(model="bundled", prompt=prompt, layer=2, head=2)
    at.toggle(key=Explorer.WEIGHTED).set_value(True).run()
    assert not at.exception
    model = load(ModelSpec("bundled"))
    run = capture(model, prompt)
    want = value_weighted(
        run.pattern(2, 2), value_norms(model, torch.tensor([run.token_ids]))[2, 2]
    )
    shown = detail_heatmap(at)["values"].astype(float)
    seen = ~np.isnan(shown)
    np.testing.assert_allclose(shown[seen], want[seen], atol=1e-5)


def test_a_stopped_prompt_says_the_view_is_still_the_previous_one():
    from models.model.spec import ModelSpec
    from ui.keys import Session
    from ui.runtime.job_keys import RunKey
    from ui.runtime.policy import admit
    from ui.runtime.settings import Settings

    at = open_app(model="bundled", prompt="the first prompt, which was read")
    allowed = admit(ModelSpec("bundled"), Settings.from_env())
    stopped = "a second prompt the visitor stopped"
    at.session_state[Session.CANCELLED] = {RunKey(allowed, stopped, None)}
    at.text_area(key=Sidebar.PROMPT).set_value(stopped).run()
    said = texts(at)
    assert "Stopped:" in said
    assert "still shows the previous prompt" in said and "the first prompt" in said
    assert "until the sidebar's is ready" not in said
    assert has_heatmap(at)  # the previous view stays usable


def test_an_unknown_model_in_a_link_offers_a_way_back():
    at = open_app(model="nobody/no-such-model-anywhere", prompt="one two three")
    said = texts(at)
    assert "runs offline" in said and "no copy of it" in said
    at.button(key=Sidebar.BACK_TO_BUNDLED).click().run()
    assert not at.exception and has_heatmap(at)  # the explorer works again


def test_the_grid_marks_heads_by_this_prompts_own_scores(bundled):
    """Each picture's letters are the heads whose scores on this prompt (recomputed here from
    Hugging Face eager attention) pass their limits; the tooltip spells them out."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from models.capture.run import capture
    from models.heads.finding.prompt_scores import SINK_MARK, copy_targets
    from models.heads.finding.scores import previous_token_score, sink_score
    from models.heads.table import Thresholds

    text = "def area(w, h):\n    return w * h\n\ndef area(w, h):\n    return w * h\n"
    at = open_app(prompt=text)
    cells = {c["id"]: c for c in component_data(at, "atlas_head_grid")["cells"]}
    ids = capture(bundled, text).token_ids
    hf = AutoModelForCausalLM.from_pretrained(
        bundled.spec.path_or_name, attn_implementation="eager"
    )
    with torch.no_grad():
        out = hf.eval()(torch.tensor([ids]), output_attentions=True)
    patterns = torch.stack([a[0] for a in out.attentions]).double().numpy()
    queries, keys = copy_targets(ids)
    limits = Thresholds()
    scores = {
        "I": (patterns[:, :, queries, keys].mean(axis=-1), limits.induction),
        "P": (previous_token_score(patterns), limits.previous_token),
        "S": (sink_score(patterns, causal=True), SINK_MARK),
    }
    want = {
        f"{layer}.{head}": "".join(k for k, (v, limit) in scores.items() if v[layer, head] > limit)
        for layer in range(patterns.shape[0])
        for head in range(patterns.shape[1])
    }
    assert any(want.values()) and len(queries) > 5
    for name, cell in cells.items():
        assert cell.get("badge", "") == want[name], name
        if want[name]:
            assert (
                "induction" in cell["title"]
                or "previous" in cell["title"]
                or "sink" in cell["title"]
            )
    assert "Letters mark what this prompt's own attention shows" in texts(at)
    assert np.isfinite(scores["P"][0]).all()


def test_a_long_prompt_picks_the_query_by_position():
    """Past 256 tokens the query is a position, not a list of every token; the number moves
    the outlined row, and the layer and head lists keep it."""
    prompt = "x = [i for i in range(10)]\n" * 30
    at = open_app(model="minilm", prompt=prompt, layer=1, head=2)
    assert not [s for s in at.selectbox if s.key == Explorer.TOKEN]
    box = at.number_input(key=Explorer.TOKEN_AT)
    n = int(box.max) + 1
    assert n > 256 and f"{n:,} tokens" in texts(at)
    assert box.value == n - 1  # a new prompt opens on its last token
    box.set_value(300).run()
    assert not at.exception
    drawn = detail_heatmap(at)
    assert drawn["rows"][drawn["selected"]].startswith("(300) ")
    at.selectbox(key=Explorer.HEAD).set_value(3).run()
    assert at.number_input(key=Explorer.TOKEN_AT).value == 300
    assert "Head 1.3" in texts(at)
