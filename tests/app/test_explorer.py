"""The explorer page, run headless through Streamlit's AppTest."""

import json

import pytest

from models.model.spec import BUNDLED_DIR
from tests.app.helpers import open_app, texts
from ui.keys import Explorer, Sidebar


def figure(at) -> dict:
    charts = at.get("plotly_chart")
    assert charts, "no heatmap on the page"
    return json.loads(charts[0].proto.spec)


@pytest.mark.parametrize("model", ["bundled", "minilm"])
def test_explorer_renders_heatmap_for_each_model(model):
    at = open_app(model=model)
    assert not at.exception
    assert at.selectbox(key=Explorer.LAYER).value == 0
    fig = figure(at)
    labels = fig["data"][0]["x"]
    assert labels[0] == ("(0) &lt;|endoftext|&gt;" if model == "bundled" else "(0) [CLS]")
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
    before = figure(at)["data"][0]["z"]
    at.selectbox(key=Explorer.HEAD).set_value(3).run()
    assert not at.exception
    assert "Head 0.3" in texts(at)
    assert figure(at)["data"][0]["z"] != before


def test_empty_prompt_gives_a_message():
    at = open_app(model="bundled")
    at.text_area(key=Sidebar.PROMPT).set_value("   ").run()
    assert not at.exception
    assert "empty" in texts(at)
    assert not at.get("plotly_chart")


def test_long_prompt_is_cut_with_a_notice():
    at = open_app(model="bundled")
    at.text_area(key=Sidebar.PROMPT).set_value("x = 1\n" * 900).run()  # 5,400 characters
    assert not at.exception
    n_ctx = json.loads((BUNDLED_DIR / "config.json").read_text())["n_positions"]
    assert f"only the first {n_ctx}" in texts(at)
    assert len(figure(at)["data"][0]["x"]) == min(n_ctx, 160)  # a window of a long prompt


def test_unknown_model_keeps_previous_model_working():
    at = open_app(model="bundled", prompt="hello there")
    at.selectbox(key=Sidebar.SOURCE).set_value("hub").run()
    at.text_input(key=Sidebar.NAME).set_value("no-such-user/no-such-model").run()
    assert not at.exception
    said = texts(at)
    assert "Could not find 'no-such-user/no-such-model'" in said
    assert "Still showing the last model that loaded" in said
    assert figure(at)["data"][0]["x"][0] == "(0) &lt;|endoftext|&gt;"
    assert at.text_input(key=Sidebar.NAME).value == "no-such-user/no-such-model"


def test_script_prompt_is_escaped_in_the_figure():
    at = open_app(model="bundled", prompt="<script>alert(1)</script>")
    assert not at.exception
    spec = at.get("plotly_chart")[0].proto.spec
    assert "<script>" not in spec and "&lt;" in spec


def test_the_head_is_named_once_and_the_view_survives_a_page_switch():
    at = open_app(model="bundled", layer=2, head=2, token=5)
    assert texts(at).count("Head 2.2") == 1  # the subheader; the figure has no second title
    assert figure(at)["layout"]["title"]["text"] == ""
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


def decoded(array):
    """A plotly array as the browser gets it: a list, or a base64 typed array."""
    import base64

    import numpy as np

    if isinstance(array, dict):
        values = np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
        shape = [int(x) for x in str(array.get("shape", len(values))).split(",")]
        return values.reshape(shape).astype(float)
    return np.array(array, dtype=float)


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
    shown = decoded(figure(at)["data"][0]["customdata"])
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
    assert at.get("plotly_chart")  # the previous view stays usable


def test_an_unknown_model_in_a_link_offers_a_way_back():
    at = open_app(model="nobody/no-such-model-anywhere", prompt="one two three")
    said = texts(at)
    assert "runs offline" in said and "no copy of it" in said
    at.button(key=Sidebar.BACK_TO_BUNDLED).click().run()
    assert not at.exception and at.get("plotly_chart")  # the explorer works again


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
    from tests.app.test_explorer_compare import component_data

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
