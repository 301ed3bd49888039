"""The fused divergence (both runs' q, k and LSE, a band of aligned queries at a time) against
Hugging Face eager attention: tokens and words, equal lengths and prompts aligned like a diff,
the causal bundled GPT-2 and the bidirectional MiniLM, whatever the band size."""

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from transformers import AutoModel, GPT2LMHeadModel

from models.capture import compare, compare_fused
from models.capture.alignment import Alignment
from models.capture.compare import align_runs, head_divergence, identical_rows
from models.capture.run import capture
from models.capture.word_split import split_words
from models.model.forward import tokenize
from models.model.spec import BUNDLED_DIR, minilm_dir
from tests.capture.test_compare import CODE_A, CODE_B, LONGER_B, SAME_A, SAME_B

PAIRS = {"equal lengths": (SAME_A, SAME_B), "longer": (SAME_A, LONGER_B), "code": (CODE_A, CODE_B)}
# Each weight of the fused pass and of HF eager is a float32 computation of the same logit:
# they differ by a relative eps of about 1e-6 (a few ulps of what the logit adds up). A row's
# JSD moves by at most 1.5 eps for such a change (sum_j p_j |log2(p_j / m_j)| <= 1.5, likewise
# for q), and its own float32 terms round by about 3e-7: 2e-6 bits holds both with room, while
# a key added into the wrong word, a row off by one or a mask one key late moves a head by 1e-3
# or more.
JSD_BOUND = 2e-6


@pytest.fixture(scope="module")
def hf_models():
    return {
        "bundled": GPT2LMHeadModel.from_pretrained(BUNDLED_DIR, attn_implementation="eager"),
        "minilm": AutoModel.from_pretrained(minilm_dir(), attn_implementation="eager"),
    }


def hf_patterns(hf, model, text: str) -> np.ndarray:
    """``layer head query key`` float64 attention of the HF eager model."""
    ids, _ = tokenize(model, text)
    with torch.no_grad():
        out = hf.eval()(ids, output_attentions=True)
    return torch.stack(out.attentions)[:, 0].double().numpy()


def in_words(pattern: np.ndarray, starts: tuple[int, ...]) -> np.ndarray:
    """Word rows and keys written out: a key word is the sum of its pieces' columns, a query
    word the mean of its pieces' rows."""
    n = len(starts) - 1
    out = np.zeros((*pattern.shape[:2], n, n))
    for i in range(n):
        rows = pattern[:, :, starts[i] : starts[i + 1]]
        for j in range(n):
            out[:, :, i, j] = rows[..., starts[j] : starts[j + 1]].sum(axis=-1).mean(axis=-1)
    return out


def reference(pa: np.ndarray, pb: np.ndarray, alignment: Alignment) -> np.ndarray:
    """Mean over aligned queries of the JSD (bits) of the rows on the aligned keys plus one bin
    holding every other key's weight (scipy's distance, squared)."""
    qa, qb = alignment.positions("a"), alignment.positions("b")
    rest_a = np.setdiff1d(np.arange(pa.shape[-1]), qa)
    rest_b = np.setdiff1d(np.arange(pb.shape[-1]), qb)
    out = np.zeros(pa.shape[:2])
    for layer in range(pa.shape[0]):
        for head in range(pa.shape[1]):
            a, b = pa[layer, head][qa], pb[layer, head][qb]
            rows_a = np.column_stack([a[:, qa], a[:, rest_a].sum(axis=1)])
            rows_b = np.column_stack([b[:, qb], b[:, rest_b].sum(axis=1)])
            out[layer, head] = np.mean(
                [jensenshannon(x, y, base=2) ** 2 for x, y in zip(rows_a, rows_b, strict=True)]
            )
    return out


@pytest.fixture
def fused_only(monkeypatch):
    """Fail if the stored-rows path runs instead of the fused one."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("the band-of-stored-rows path ran")

    monkeypatch.setattr(compare, "band_divergence", refuse)


@pytest.mark.parametrize("small", [False, True], ids=["one-band", "small-bands"])
@pytest.mark.parametrize("words", [False, True], ids=["tokens", "words"])
@pytest.mark.parametrize("pair", list(PAIRS), ids=list(PAIRS))
@pytest.mark.parametrize("name", ["bundled", "minilm"])
def test_fused_divergence_matches_hf_eager(
    request, hf_models, fused_only, monkeypatch, name, pair, words, small
):
    model = request.getfixturevalue(name)
    text_a, text_b = PAIRS[pair]
    if small:  # bands of 8 query tokens, chunks of one key: every seam is crossed
        monkeypatch.setattr(compare_fused, "BAND_COLUMNS", 8)
        monkeypatch.setattr(compare_fused, "CHUNK_CELLS", 1)
    run_a, run_b = capture(model, text_a, dense_limit=0), capture(model, text_b, dense_limit=0)
    assert compare_fused.fusable(run_a.store, run_b.store) is not None
    split = [split_words(model.tokenizer, r.prompt, r.token_ids, r.tokens) for r in (run_a, run_b)]
    pa, pb = (hf_patterns(hf_models[name], model, t) for t in (text_a, text_b))
    if words:
        pa, pb = in_words(pa, split[0].starts), in_words(pb, split[1].starts)
    got = head_divergence(run_a, run_b, *(split if words else (None, None)))
    assert got.words == words
    if name == "bundled" and not words:  # (MiniLM's pieces, and words, of the code pair
        assert got.alignment.by_position == (pair == "equal lengths")  # match in number)
    expected = reference(pa, pb, got.alignment)
    assert expected.max() > 0.01  # the change moved some head
    np.testing.assert_allclose(got.divergence, expected, rtol=0, atol=JSD_BOUND)


def test_a_prompt_against_itself_is_exactly_zero(any_model, fused_only):
    run = capture(any_model, CODE_A, dense_limit=0)
    again = capture(any_model, CODE_A, dense_limit=0)
    assert np.all(head_divergence(run, again).divergence == 0.0)


def test_rows_of_the_common_start_count_zero_only_in_a_causal_model(bundled, minilm):
    run_a, run_b = capture(bundled, CODE_A), capture(bundled, CODE_B)
    # "<|endoftext|> def ␣mo v ing _" then "a ver age" in A, "s um" in B
    assert run_a.token_ids[:6] == run_b.token_ids[:6] and run_a.token_ids[6] != run_b.token_ids[6]
    assert identical_rows(run_a, run_b, align_runs(run_a, run_b)) == 6
    words = [
        split_words(bundled.tokenizer, r.prompt, r.token_ids, r.tokens) for r in (run_a, run_b)
    ]
    # words <|endoftext|>, def, moving, _ end at tokens 1, 2, 5, 6 in both: four rows
    assert words[0].starts[:5] == words[1].starts[:5] == (0, 1, 2, 5, 6)
    assert identical_rows(run_a, run_b, align_runs(run_a, run_b, *words), *words) == 4
    enc_a, enc_b = capture(minilm, CODE_A), capture(minilm, CODE_B)
    assert identical_rows(enc_a, enc_b, align_runs(enc_a, enc_b)) == 0  # every row sees B's end
    same = align_runs(enc_a, enc_a)
    assert identical_rows(enc_a, enc_a, same) == same.n_aligned == enc_a.n_tokens
