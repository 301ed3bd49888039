"""Corpus-level scores against each text scored on its own, and top examples by brute force."""

import numpy as np
import pytest

from models.capture.run import capture
from models.heads.finding import corpus_scores
from models.heads.finding.corpus import english
from models.heads.finding.corpus_scores import (
    EXAMPLE_SCORES,
    TOP_K,
    score_corpus,
    score_estimate,
    text_scores,
)
from models.heads.finding.induction import measure_repeated
from models.heads.finding.scores import induction_targets, text_induction_score

TEXTS = (
    "def add(a, b):\n    return a + b\n\n\ndef add_three(a, b, c):\n    return add(a, add(b, c))\n",
    "import os\nprint(os.getcwd())\n",
    "for i in range(10):\n    total = total + i\n    print(total, i)\n",
)


def test_induction_targets_by_hand():
    #             0  1  2  3  4  5  6
    ids = [5, 7, 9, 5, 7, 5, 5]
    # 3: previous 5 at 0 -> key 1; 4: previous 7 at 1 -> key 2; 5: previous 5 at 3 -> key 4;
    # 6: previous 5 at 5 -> key 6 is itself -> none
    assert induction_targets(ids).tolist() == [-1, -1, -1, 1, 2, 4, -1]
    pattern = np.zeros((7, 7))
    pattern[3, 1], pattern[4, 2], pattern[5, 4] = 0.5, 1.0, 0.0
    assert text_induction_score(pattern, ids) == pytest.approx(0.5)
    assert np.isnan(text_induction_score(np.eye(3), [1, 2, 3]))


@pytest.fixture(scope="module")
def scored(bundled):
    return score_corpus(bundled, TEXTS)


def test_corpus_scores_are_the_mean_of_per_text_scores(bundled, scored):
    runs = [capture(bundled, text) for text in TEXTS]
    per = [text_scores(run.patterns, run.token_ids, causal=True) for run in runs]
    for name in ("previous_token", "duplicate_token", "current_token", "sink", "top_sink_alpha"):
        each = np.stack([p[name] for p in per])
        np.testing.assert_allclose(scored.spreads[name].per_text, each, atol=1e-12)
        np.testing.assert_allclose(scored.spreads[name].mean, np.nanmean(each, axis=0), atol=1e-12)
    text_ind = np.stack([text_induction_score(run.patterns, run.token_ids) for run in runs])
    np.testing.assert_allclose(
        scored.spreads["induction_text"].mean, np.nanmean(text_ind, 0), atol=1e-12
    )
    prev = np.stack([p["previous_token"] for p in per])
    np.testing.assert_array_equal(scored.top_sink_pos, np.stack([p["top_sink_pos"] for p in per]))
    np.testing.assert_allclose(
        scored.spreads["previous_token"].se, prev.std(axis=0, ddof=1) / np.sqrt(3), atol=1e-12
    )
    assert scored.n_texts == 3 and scored.n_tokens == sum(r.n_tokens for r in runs)
    assert scored.tokens[1] == runs[1].tokens


def brute_force(runs, name, layer, head):
    found = []
    for t, run in enumerate(runs):
        a, ids = run.pattern(layer, head), run.token_ids
        n = len(ids)
        if name == "previous_token":
            found += [(a[i, i - 1], t, i, i - 1) for i in range(1, n)]
        elif name == "current_token":
            found += [(a[i, i], t, i, i) for i in range(1, n)]
        elif name == "induction_text":
            targets = induction_targets(ids)
            found += [(a[i, k], t, i, k) for i, k in enumerate(targets) if k >= 0]
        elif name == "duplicate_token":
            for i in range(n):
                copies = [j for j in range(i) if ids[j] == ids[i]]
                if copies:
                    found.append(
                        (
                            sum(a[i, j] for j in copies),
                            t,
                            i,
                            max(copies, key=lambda j: (a[i, j], -j)),
                        )
                    )
        else:
            found.append((a[1:, 0].mean(), t, -1, 0))
    return sorted(found, key=lambda f: -f[0])[:TOP_K]


@pytest.mark.parametrize("name", EXAMPLE_SCORES)
def test_top_examples_are_the_strongest_places(bundled, scored, name):
    runs = [capture(bundled, text) for text in TEXTS]
    for layer, head in [(0, 3), (2, 2)]:
        got = scored.examples[name].of(layer, head)
        want = brute_force(runs, name, layer, head)
        assert [e.value for e in got] == pytest.approx([w[0] for w in want], abs=1e-6)
        assert [(e.text, e.query, e.key) for e in got][:3] == [w[1:] for w in want][:3]


def test_previous_token_head_fires_on_its_neighbour(bundled):
    scored = score_corpus(bundled, english().texts[:4], max_tokens=64)
    assert scored.n_cut == 4 and all(len(t) == 64 for t in scored.tokens)
    best = scored.examples["previous_token"].of(0, 3)[0]
    assert best.key == best.query - 1 and best.value > 0.9
    assert scored.spreads["previous_token"].lower_bound[0, 3] > 0.5


def test_repeated_induction_per_sequence_averages_to_the_score(bundled):
    repeated = measure_repeated(bundled, 10, 3, 0)
    assert repeated.induction_per_sequence.shape == (3, 3, 4)
    np.testing.assert_allclose(
        repeated.induction_per_sequence.mean(axis=0), repeated.induction, atol=1e-12
    )


def test_one_layer_per_pass_gives_the_same_scores(bundled, scored, monkeypatch):
    monkeypatch.setattr(corpus_scores, "PATTERN_BYTES", 1)  # every layer its own pass
    assert corpus_scores.layer_groups(bundled, 40) == [[0], [1], [2]]
    alone = score_corpus(bundled, TEXTS)
    for name, values in scored.spreads.items():
        np.testing.assert_allclose(alone.spreads[name].per_text, values.per_text, atol=1e-6)
    np.testing.assert_array_equal(alone.top_sink_pos, scored.top_sink_pos)


def test_score_estimate_grows_with_the_texts(bundled):
    small, large = score_estimate(bundled, [32]), score_estimate(bundled, [32, 128])
    assert 0 < small.seconds() < large.seconds() and 0 < small.peak_bytes < large.peak_bytes
    facts = bundled.facts
    assert large.peak_bytes >= facts.n_total_heads * 128 * 128 * 4  # every pattern at 128 tokens
