"""Repeated-token scores in chunks: the same scores whatever the chunk (up to float32 rounding),
never more sequences in a pass than the chunk, and a memory estimate that grows with the chunk,
not the batch."""

import numpy as np
import pytest

from models.heads.finding import induction
from models.heads.finding.induction import (
    CHUNK_BYTES,
    REPEATED_SCORES,
    ScoreError,
    default_chunk,
    measure_repeated,
    repeated_estimate,
    repeated_peak_bytes,
)
from models.model.facts import ModelFacts

# SmolLM2-135M's shape, written out so the estimate is checked without loading it.
SMOLLM2 = ModelFacts(
    name="SmolLM2-135M",
    architecture="LlamaForCausalLM",
    n_layers=30,
    n_heads=9,
    n_kv_heads=3,
    d_head=64,
    d_model=576,
    n_ctx=8192,
    causal=True,
    positional="rotary",
    prepends_bos=False,
    n_params=134_515_008,
)
SMOLLM2_VOCAB = 49_152


# Scores are means of float32 attention weights, each in [0, 1]. A pass over a chunk of another
# size runs kernels of another shape, which may sum in another order (oneDNN blocks by shape):
# each weight, hence each score, then moves by a few float32 ulps at 1 (2^-23). 16 of them
# (1.9e-6) bound that with room (these scores lie within 3.2e-7 of a float64 pass), while a
# sequence scored against the wrong tokens moves a score by 1e-2 or more.
CHUNK_ROUNDING = 16 * 2.0**-23


@pytest.mark.parametrize("name", ["bundled", "minilm"])
def test_scores_are_the_same_whatever_the_chunk(request, name):
    model = request.getfixturevalue(name)
    whole = measure_repeated(model, 12, 5, 3, chunk=5)
    for chunk in (1, 2):
        part = measure_repeated(model, 12, 5, 3, chunk=chunk)
        for score in (*REPEATED_SCORES, "induction_per_sequence"):
            np.testing.assert_allclose(
                getattr(part, score),
                getattr(whole, score),
                rtol=0,
                atol=CHUNK_ROUNDING,
                err_msg=score,
            )
    assert whole.induction_per_sequence.shape == (5, model.facts.n_layers, model.facts.n_heads)


def test_no_pass_holds_more_sequences_than_the_chunk(bundled, monkeypatch):
    seen, fractions = [], []
    real = induction.run_with_hooks

    def spy(model, ids, hooks, **kwargs):
        seen.append(int(ids.shape[0]))
        assert len(hooks) == model.facts.n_layers  # every layer scored inside the pass
        return real(model, ids, hooks, **kwargs)

    monkeypatch.setattr(induction, "run_with_hooks", spy)
    measure_repeated(bundled, 10, 7, 0, chunk=3, progress=lambda f, _t: fractions.append(f))
    assert seen == [3, 3, 1]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_peak_estimate_grows_with_the_chunk_not_the_batch():
    one = repeated_peak_bytes(SMOLLM2, SMOLLM2_VOCAB, 500, batch=1, chunk=1)
    many = repeated_peak_bytes(SMOLLM2, SMOLLM2_VOCAB, 500, batch=64, chunk=1)
    wide = repeated_peak_bytes(SMOLLM2, SMOLLM2_VOCAB, 500, batch=64, chunk=8)
    assert many - one == 63 * len(REPEATED_SCORES) * 270 * 8  # only the kept scores grow
    assert wide > 7 * one
    # one sequence holds one layer's 9 x 1003^2 patterns a few times, never all 30 layers
    all_layers = 30 * 9 * 1003**2 * 4
    assert 9 * 1003**2 * 4 < one < all_layers
    assert default_chunk(SMOLLM2, SMOLLM2_VOCAB, 500) >= 1
    assert (
        repeated_peak_bytes(SMOLLM2, SMOLLM2_VOCAB, 500, batch=64) <= CHUNK_BYTES + 10**6
        or default_chunk(SMOLLM2, SMOLLM2_VOCAB, 500) == 1
    )


def test_estimate_of_a_loaded_model(bundled):
    small, large = repeated_estimate(bundled, 10, 2), repeated_estimate(bundled, 40, 8)
    assert 0 < small.seconds() < large.seconds() and 0 < small.peak_bytes < large.peak_bytes


def test_settings_out_of_range_say_so(bundled):
    with pytest.raises(ScoreError, match="at least 2"):
        measure_repeated(bundled, 1, 2)
    with pytest.raises(ScoreError, match="between 1 and 64"):
        measure_repeated(bundled, 10, 65)
    with pytest.raises(ScoreError, match="at most"):
        measure_repeated(bundled, bundled.facts.n_ctx, 1)
