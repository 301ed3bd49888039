"""One prompt's head scores read off the captured store, against the pure score functions on
Hugging Face eager attention (the same token ids, every entry of every pattern)."""

import numpy as np
import pytest
import torch

from models.capture.run import capture
from models.head import Head
from models.heads.finding.prompt_scores import (
    PromptScores,
    copy_targets,
    head_marks,
    prompt_scores,
)
from models.heads.finding.scores import previous_token_score, sink_score
from models.heads.table import Thresholds

TEXT = (
    "def moving_average(values, window):\n    total = sum(values[:window])\n"
    "    return total / window\n\n"
    "def moving_average(values, window):\n    total = sum(values[:window])\n"
    "    return total / window\n"
)


@pytest.fixture(scope="module")
def eager(bundled):
    from transformers import AutoModelForCausalLM

    ids = capture(bundled, TEXT).token_ids
    hf = AutoModelForCausalLM.from_pretrained(
        bundled.spec.path_or_name, attn_implementation="eager"
    )
    with torch.no_grad():
        out = hf.eval()(torch.tensor([ids]), output_attentions=True)
    return ids, torch.stack([a[0] for a in out.attentions]).double().numpy()


@pytest.mark.parametrize("dense_limit", [None, 0], ids=["dense", "factored"])
def test_scores_equal_the_pure_functions_on_eager_patterns(bundled, eager, dense_limit):
    ids, patterns = eager
    run = capture(bundled, TEXT, **({} if dense_limit is None else {"dense_limit": dense_limit}))
    assert run.token_ids == ids
    got = prompt_scores(run)
    queries, keys = copy_targets(ids)
    want = patterns[:, :, queries, keys].mean(axis=-1)
    np.testing.assert_allclose(got.induction, want, atol=1e-5)
    np.testing.assert_allclose(got.previous_token, previous_token_score(patterns), atol=1e-5)
    np.testing.assert_allclose(got.sink, sink_score(patterns, causal=True), atol=1e-5)
    assert got.n_repeats > 20  # the second copy of the function repeats the first
    assert np.nanmax(got.induction) > 0.4  # the bundled model has an induction head


def test_copy_targets_are_the_repeated_bigrams_by_hand():
    #          0  1  2  3  4  5  6  7
    ids = [9, 1, 2, 7, 1, 2, 1, 3]
    # 4 (1, then 2) copies 1 (1, then 2): key 2. 5 (2, then 1) copied 2 (2, then 7): no.
    # 6 (1, then 3) copied 4 (1, then 2): no. 7 is last (nothing follows it).
    queries, keys = copy_targets(ids)
    assert queries.tolist() == [4] and keys.tolist() == [2]


def test_a_prompt_without_repeats_has_no_induction_score(bundled):
    got = prompt_scores(capture(bundled, "abc def"))
    assert got.n_repeats == 0 and np.isnan(got.induction).all()
    assert np.isfinite(got.previous_token).all()


def test_marks_letter_each_score_over_its_threshold():
    grid = lambda *cells: np.array(cells, dtype=float).reshape(1, 3)
    scores = PromptScores(
        induction=grid(0.9, 0.1, np.nan),
        previous_token=grid(0.41, 0.4, 0.0),
        sink=grid(0.85, 0.0, 0.81),
        n_repeats=3,
    )
    assert head_marks(scores, Thresholds()) == {Head(0, 0): "IPS", Head(0, 2): "S"}
    assert head_marks(scores, Thresholds(), sink_mark=0.82) == {Head(0, 0): "IPS"}
