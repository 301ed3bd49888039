"""Head scores on the real models against Hugging Face eager attention, computed independently.

The references below use plain loops over ``output_attentions=True`` from transformers, fed the
exact token ids the app used; they share no code with ``models.heads.finding.scores``.
"""

import json

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from models.capture.run import capture
from models.heads.finding.corpus_scores import score_corpus
from models.heads.finding.induction import measure_repeated, repeated_tokens
from models.heads.finding.scores import sink_alphas
from models.heads.table import Thresholds, corpus_flag_grids
from models.model.forward import tokenize
from models.model.spec import BUNDLED_DIR

SPAN, BATCH, SEED = 50, 8, 0
PROMPT = (
    'def area(width, height):\n    """Area of a rectangle."""\n    return width * height\n'
    "\n\nprint(area(3, 4), area(5, 6))\n"
)
SENTENCE = "The cat sat on the mat, and the cat looked at the dog; the dog sat down."


def hf_attentions(model, ids: torch.Tensor) -> torch.Tensor:
    """``layer batch head q k`` from transformers' eager attention on the model's own weights."""
    path = model.spec.path_or_name
    cls = AutoModelForCausalLM if model.facts.causal else AutoModel
    hf = cls.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        out = hf(ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    return torch.stack(out.attentions).double()


def reference_repeated(att: torch.Tensor, ids: torch.Tensor, prefix: int, span: int) -> dict:
    """The four scores from ``layer batch head q k`` attentions, written out plainly."""
    n = att.shape[-1]
    qs = torch.arange(prefix + span, prefix + 2 * span)
    rows = torch.arange(1, n)
    per_seq = []
    for b in range(ids.shape[0]):
        same = torch.zeros(n, n, dtype=torch.double)
        for i in range(n):
            for j in range(i):
                same[i, j] = float(ids[b, i] == ids[b, j])
        has_copy = same.sum(-1) > 0
        per_seq.append((att[:, b] * same).sum(-1)[..., has_copy].mean(-1))
    return {
        "induction": att[..., qs, qs - span + 1].mean(dim=(1, 3)).numpy(),
        "previous_token": att[..., rows, rows - 1].mean(dim=(1, 3)).numpy(),
        "current_token": att[..., rows, rows].mean(dim=(1, 3)).numpy(),
        "duplicate_token": torch.stack(per_seq).mean(0).numpy(),
    }


@pytest.mark.parametrize("name", ["bundled", "minilm"])
def test_repeated_tokens_are_ordinary_and_repeat(request, name):
    model = request.getfixturevalue(name)
    tokens = repeated_tokens(model, SPAN, BATCH, SEED)
    ids = tokens.ids
    frame = tokenize(model, "x")[0][0].tolist()
    assert tokens.prefix_len == 1 and ids[0, 0].item() == frame[0]
    body = ids[:, 1 : 1 + 2 * SPAN]
    assert torch.equal(body[:, :SPAN], body[:, SPAN:])
    special = set(model.tokenizer.all_special_ids)
    assert not any(int(t) in special for t in body.flatten())
    pieces = model.tokenizer.convert_ids_to_tokens(sorted(set(body.flatten().tolist())))
    assert not any(p.startswith("[") and p.endswith("]") for p in pieces)  # no [unused7]
    if not model.facts.causal:
        assert ids[0, -1].item() == model.tokenizer.sep_token_id
    again = repeated_tokens(model, SPAN, BATCH, SEED)
    assert torch.equal(again.ids, ids)  # fixed seed


@pytest.mark.parametrize("name", ["bundled", "minilm"])
def test_repeated_scores_match_hf_eager(request, name):
    model = request.getfixturevalue(name)
    tokens = repeated_tokens(model, SPAN, BATCH, SEED)
    expected = reference_repeated(
        hf_attentions(model, tokens.ids), tokens.ids, tokens.prefix_len, SPAN
    )
    got = measure_repeated(model, SPAN, BATCH, SEED)
    for key, values in expected.items():
        np.testing.assert_allclose(getattr(got, key), values, atol=1e-5, rtol=0, err_msg=key)


@pytest.mark.parametrize("name, text", [("bundled", PROMPT), ("minilm", SENTENCE)])
def test_text_scores_match_hf_eager(request, name, text):
    model = request.getfixturevalue(name)
    ids, _ = tokenize(model, text)
    att = hf_attentions(model, ids)[:, 0]  # layer head q k
    n = ids.shape[1]
    got = {k: v.per_text[0] for k, v in score_corpus(model, [text]).spreads.items()}
    first = att[:, :, 1:, 0].mean(-1)  # alpha on position 0, row 0 left out
    np.testing.assert_allclose(got["sink"], first.numpy(), atol=1e-5, rtol=0)
    rows = torch.arange(1, n)
    np.testing.assert_allclose(
        got["previous_token"], att[:, :, rows, rows - 1].mean(-1).numpy(), atol=1e-5, rtol=0
    )
    np.testing.assert_allclose(
        got["current_token"], att[:, :, rows, rows].mean(-1).numpy(), atol=1e-5, rtol=0
    )
    alphas = sink_alphas(capture(model, text).patterns, model.facts.causal)
    for k in range(n):
        seen = [t for t in range(n) if t != k and (t > k or not model.facts.causal)]
        if seen:
            np.testing.assert_allclose(
                alphas[..., k], att[:, :, seen, k].mean(-1), atol=1e-5, rtol=0
            )


def reference_spread(att: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Entropy (nats) and distance back (tokens) of ``layer head q k`` attentions, written out:
    for each query i >= 1, -sum_j A ln A and sum_j A * (i - j), then the mean over queries."""
    n = att.shape[-1]
    entropy = torch.zeros(att.shape[:2], dtype=torch.double)
    distance = torch.zeros(att.shape[:2], dtype=torch.double)
    for i in range(1, n):
        row = att[..., i, :]
        entropy -= torch.special.xlogy(row, row).sum(-1)
        distance += (row * (i - torch.arange(n, dtype=torch.double))).sum(-1)
    return (entropy / (n - 1)).numpy(), (distance / (n - 1)).numpy()


@pytest.mark.parametrize(
    "name, text",
    [
        ("bundled", PROMPT),
        ("minilm", SENTENCE),
        pytest.param("smollm2", SENTENCE + " " + SENTENCE, marks=pytest.mark.slow),
    ],
)
def test_entropy_and_distance_match_hf_eager(request, name, text):
    model = request.getfixturevalue(name)
    ids, _ = tokenize(model, text)
    entropy, distance = reference_spread(hf_attentions(model, ids)[:, 0])
    scored = score_corpus(model, [text, text[: len(text) // 2]])
    got = {k: scored.spreads[k].per_text[0] for k in ("entropy", "distance")}
    # the same bound as the other scores: both read the same float32 weights as HF eager
    np.testing.assert_allclose(got["entropy"], entropy, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["distance"], distance, atol=1e-5, rtol=0)
    if not model.facts.causal:  # an encoder also looks ahead: some head's balance is negative
        assert (got["distance"] < 0).any() and (got["distance"] > 0).any()
    # over two texts, the mean and standard error are over the texts
    per = scored.spreads["distance"].per_text
    assert per.shape == (2, model.facts.n_layers, model.facts.n_heads)
    np.testing.assert_allclose(
        scored.spreads["distance"].se, per.std(axis=0, ddof=1) / np.sqrt(2), atol=1e-12
    )


def test_minilm_sinks_on_cls_and_sep_match_hf(minilm):
    scored = score_corpus(minilm, [SENTENCE])
    ids, _ = tokenize(minilm, SENTENCE)
    assert scored.tokens[0][0] == "[CLS]" and scored.tokens[0][-1] == "[SEP]"
    att = hf_attentions(minilm, ids)[:, 0]
    n = ids.shape[1]
    alphas = sink_alphas(capture(minilm, SENTENCE).patterns, causal=False)
    cls_alpha = att[:, :, 1:, 0].mean(-1)
    sep_alpha = att[:, :, : n - 1, n - 1].mean(-1)  # every query except [SEP] itself
    np.testing.assert_allclose(alphas[..., 0], cls_alpha, atol=1e-5, rtol=0)
    np.testing.assert_allclose(alphas[..., n - 1], sep_alpha, atol=1e-5, rtol=0)
    # MiniLM parks heavily on [SEP]/[CLS] in some heads; the per-key search finds them.
    top_pos = scored.top_sink_pos[0]
    top_alpha = scored.spreads["top_sink_alpha"].per_text[0]
    on_special = np.isin(top_pos, [0, n - 1])
    assert on_special.any()
    assert (
        top_alpha[on_special] >= np.maximum(cls_alpha, sep_alpha).numpy()[on_special] - 1e-5
    ).all()


def logged_final_scores() -> dict | None:
    """Head scores the training run measured on its final weights, if its log has them."""
    log = BUNDLED_DIR / "training_log.json"
    if not log.is_file():
        return None
    data = json.loads(log.read_text())
    stages = data.get("stages") or [data]
    return stages[-1].get("final_scores")


def known_heads(bundled) -> dict[str, tuple[int, int]]:
    """The bundled model's strongest induction and previous-token heads, found without the app
    (Hugging Face eager attention, another seed, another text)."""
    tokens = repeated_tokens(bundled, SPAN, BATCH, seed=1234)
    grids = {
        "induction": reference_repeated(
            hf_attentions(bundled, tokens.ids), tokens.ids, tokens.prefix_len, SPAN
        )["induction"]
    }
    ids, _ = tokenize(bundled, SENTENCE + "\n" + PROMPT)
    att = hf_attentions(bundled, ids)[:, 0]
    rows = torch.arange(1, ids.shape[1])
    grids["previous_token"] = att[:, :, rows, rows - 1].mean(-1).numpy()
    logged = logged_final_scores()
    for name, grid in grids.items():
        assert grid.max() > 0.5, f"the bundled model has no strong {name} head"
        if logged is not None:  # the training run found the same head
            assert np.argmax(logged[name]) == np.argmax(grid), name
    return {
        name: tuple(int(i) for i in np.unravel_index(np.argmax(g), g.shape))
        for name, g in grids.items()
    }


def test_bundled_known_heads_are_flagged(bundled):
    known = known_heads(bundled)
    repeated = measure_repeated(bundled, SPAN, BATCH, SEED)
    flags = corpus_flag_grids(repeated, score_corpus(bundled, [PROMPT]), Thresholds())
    assert flags["induction"][known["induction"]], repeated.induction
    assert flags["previous_token"][known["previous_token"]]
    assert repeated.induction[known["induction"]] == repeated.induction.max()
