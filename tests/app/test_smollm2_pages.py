"""AppTest: SmolLM2 from a share link (?model=smollm2) and from the sidebar's source list."""

from tests.app.helpers import open_app, texts

PROMPT = "The ferry leaves the harbour at seven. The ferry leaves the harbour at seven."


def test_share_link_opens_smollm2_in_the_explorer(smollm2):
    at = open_app(model="smollm2", prompt=PROMPT)
    assert not at.exception
    assert at.selectbox(key="atlas_source").value == "SmolLM2-135M (offline)"
    said = texts(at)
    assert "SmolLM2-135M-Instruct" in said and "30 layers × 9 heads" in said and "GQA" in said
    assert at.get("plotly_chart")
    assert len(at.selectbox(key="explorer_layer").options) == 30


def test_examples_follow_the_model(smollm2):
    bundled = open_app(model="bundled")
    assert "def moving_average" in bundled.text_area(key="atlas_prompt").value
    at = open_app(model="smollm2")
    assert "quick brown fox" in at.text_area(key="atlas_prompt").value
    assert "A chat turn (chat template)" in at.selectbox(key="atlas_example").options
