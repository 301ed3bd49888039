"""The explorer on a long SmolLM2 prompt (the one real-scale check of these views): rollout would
need every layer's full pattern, so it is refused with the reason and the strip keeps showing
the head's attention."""

import pytest

from models.capture.rollout import longest_rollout
from tests.app.helpers import open_app, texts
from ui.keys import Explorer
from ui.sections.examples import passage_twice


@pytest.mark.slow
def test_rollout_is_refused_on_a_long_prompt(smollm2):
    limit = longest_rollout(smollm2.facts)  # 1,295 tokens on SmolLM2
    ids = smollm2.tokenizer(passage_twice())["input_ids"][: limit + 100]
    at = open_app(model="smollm2", prompt=smollm2.tokenizer.decode(ids))
    at.toggle(key=Explorer.ROLLOUT).set_value(True).run()
    assert not at.exception
    said = texts(at)
    assert "Attention rollout needs every layer's full pattern" in said
    assert f"available up to {limit:,} tokens" in said
    assert "the strip shows this head's attention instead" in said
