"""AppTest: SmolLM2 from a share link (?model=smollm2) and from the sidebar's source list."""

from tests.app.helpers import has_heatmap, open_app, texts
from ui.keys import Explorer, Sidebar

PROMPT = "The ferry leaves the harbour at seven. The ferry leaves the harbour at seven."


def test_share_link_opens_smollm2_in_the_explorer(smollm2):
    at = open_app(model="smollm2", prompt=PROMPT)
    assert not at.exception
    assert at.selectbox(key=Sidebar.SOURCE).value == "smollm2"
    said = texts(at)
    assert "SmolLM2-135M-Instruct" in said and "30 layers × 9 heads" in said and "GQA" in said
    assert has_heatmap(at)
    assert len(at.selectbox(key=Explorer.LAYER).options) == 30


def test_examples_follow_the_model(smollm2):
    bundled = open_app(model="bundled")
    assert "def moving_average" in bundled.text_area(key=Sidebar.PROMPT).value
    at = open_app(model="smollm2")
    assert "quick brown fox" in at.text_area(key=Sidebar.PROMPT).value
    assert "A chat turn (chat template)" in at.selectbox(key=Sidebar.EXAMPLE).options
