"""The atlas on real models against independent references: patterns captured the ordinary way,
vectors read from the bridge's own cache, and ``torch.linalg.svd`` on them."""

import dataclasses

import numpy as np
import pytest
import torch

from models.capture.run import capture
from models.head import Head
from models.heads.atlas.card import head_card
from models.heads.atlas.compute import atlas_estimate, compute_atlas, moments_bytes, with_dla
from models.heads.atlas.metrics import METRIC_NAMES
from models.heads.atlas.pictures import PICTURE, pooled
from models.heads.finding.corpus import Corpus
from models.heads.finding.corpus_scores import score_corpus
from models.heads.finding.induction import measure_repeated
from models.heads.table import Thresholds, corpus_flag_grids
from models.model.forward import tokenize
from models.model.variants import LayerVariant
from models.progress import Cancelled
from tests.heads.atlas.tiny import REPEATED, TEXTS


def cached(model, text: str, name: str) -> torch.Tensor:
    """``pos head d`` of hook ``name`` from the bridge's own cache."""
    ids, _ = tokenize(model, text)
    with model.lock, torch.no_grad():
        _, cache = model.bridge.run_with_cache(ids)
    return cache[name][0].double()


def test_every_score_is_the_finders_with_its_standard_error(bundled, corpus, atlas):
    scores = score_corpus(bundled, corpus.texts)
    repeated = measure_repeated(bundled, *REPEATED)
    assert set(atlas.measures) == set(METRIC_NAMES)
    for name in ("previous_token", "sink", "entropy", "distance", "induction_text"):
        np.testing.assert_allclose(atlas.measures[name].values, scores.spreads[name].mean)
        np.testing.assert_allclose(atlas.measures[name].se, scores.spreads[name].se)
    np.testing.assert_allclose(atlas.measures["induction"].values, repeated.induction)
    flags = corpus_flag_grids(repeated, scores, Thresholds())
    assert all((atlas.flags[name] == flags[name]).all() for name in flags)
    assert (
        atlas.measures["layer"].values[2, 1] == 2 and atlas.measures["head_index"].values[2, 1] == 1
    )
    assert np.isnan(atlas.measures["zero_ablation"].values).all()
    assert atlas.measures["ov_copying"].se is None


def test_activation_is_the_strongest_weight_off_the_first_key(bundled, atlas):
    per_text = []
    for t, text in enumerate(TEXTS):
        patterns = capture(bundled, text).patterns  # layer head q k
        rest = patterns[..., 1:]
        per_text.append(rest.max(axis=(-2, -1)))
        flat = rest.reshape(*rest.shape[:2], -1).argmax(-1)
        queries, keys = np.divmod(flat, rest.shape[-1])
        assert (atlas.peaks.query[t] == queries).all() and (atlas.peaks.key[t] == keys + 1).all()
    per_text = np.stack(per_text)
    np.testing.assert_allclose(atlas.peaks.value, per_text, atol=1e-7)
    np.testing.assert_allclose(atlas.measures["activation"].values, per_text.mean(0), atol=1e-7)
    se = per_text.std(0, ddof=1) / np.sqrt(len(TEXTS))
    np.testing.assert_allclose(atlas.measures["activation"].se, se, atol=1e-7)


@pytest.mark.parametrize(
    "space, hook", [("key", "hook_k"), ("query", "hook_q"), ("value", "hook_v")]
)
def test_components_equal_the_svd_of_the_cached_vectors(bundled, atlas, space, hook):
    layer = 1
    x = torch.cat([cached(bundled, t, f"blocks.{layer}.attn.{hook}")[1:] for t in TEXTS])
    low = atlas.lowrank[space]
    assert low.n_tokens == x.shape[0]
    for head in range(bundled.facts.n_heads):
        centred = x[:, head] - x[:, head].mean(0)
        _, s, vh = torch.linalg.svd(centred, full_matrices=False)
        k = low.variance.shape[-1]
        np.testing.assert_allclose(
            low.variance[layer, head], (s[:k] ** 2 / (x.shape[0] - 1)).numpy(), rtol=1e-6
        )
        cosines = (torch.from_numpy(low.directions[layer, head]) * vh[:k]).sum(-1).abs()
        np.testing.assert_allclose(cosines.numpy(), np.ones(k), atol=1e-6)
        loads = centred @ torch.from_numpy(low.directions[layer, head, 0])
        assert low.top_value[layer, head, 0, 0, 0] == pytest.approx(float(loads.max()), rel=1e-6)
        assert low.top_value[layer, head, 0, 1, 0] == pytest.approx(float(loads.min()), rel=1e-6)


def test_output_components_are_those_of_z_times_w_o(bundled, atlas):
    layer, head = 2, 3
    z = torch.cat([cached(bundled, t, f"blocks.{layer}.attn.hook_z")[1:, head] for t in TEXTS])
    w_o = bundled.bridge.blocks[layer].attn.W_O[head].detach().double()
    out = z @ w_o  # pos d_model
    s = torch.linalg.svdvals(out - out.mean(0))
    low = atlas.lowrank["output"]
    k = low.variance.shape[-1]
    np.testing.assert_allclose(
        low.variance[layer, head], (s[:k] ** 2 / (out.shape[0] - 1)).numpy(), rtol=1e-6
    )
    total = out.var(0).sum()
    np.testing.assert_allclose(
        low.share[layer, head], (s[:k] ** 2 / (out.shape[0] - 1) / total).numpy(), rtol=1e-6
    )


def test_the_card_of_a_previous_token_head(atlas):
    best = np.unravel_index(np.nanargmax(atlas.measures["previous_token"].values), (3, 4))
    card = head_card(atlas, Head(*map(int, best)))
    line = card.metric("previous_token")
    assert line.status == "measured" and line.rank == 1 and line.of == 12
    assert line.value == pytest.approx(atlas.measures["previous_token"].values[best])
    assert line.se == pytest.approx(atlas.measures["previous_token"].se[best])
    assert "standard error" in line.note
    assert card.metric("ov_copying").se is None and "weights" in card.metric("ov_copying").note
    assert card.metric("zero_ablation").status == "not_measured"
    assert ("qk_previous", "previous_token") in card.twins
    assert sorted(s.text for s in card.samples) == [0, 1, 2, 3]  # four texts, one per decile
    assert [s.decile for s in card.samples] == sorted(s.decile for s in card.samples)
    first = card.samples[0]
    assert first.activation == pytest.approx(atlas.peaks.value[(first.text, *best)])
    assert first.row[0][1] == pytest.approx(first.activation)  # the peak leads its row
    keys = card.lowrank[1]
    assert keys.space == "key" and keys.owner is None and len(keys.components) == 4
    top = keys.components[0].positive[0]
    assert top.token == atlas.tokens[top.text][top.position] and top.position >= 1


def test_a_linear_attention_layer_says_what_does_not_apply(atlas):
    layers = (
        LayerVariant("softmax", 4),
        LayerVariant("linear", 4),
        LayerVariant("softmax", 4, sinks=True),
    )
    changed = dataclasses.replace(atlas, layers=layers)
    card = head_card(changed, Head(1, 2))
    assert card.metric("previous_token").status == "not_applicable"
    assert "linear" in card.metric("previous_token").note
    assert card.metric("ov_copying").status == "measured"
    sink_card = head_card(changed, Head(2, 0))
    assert sink_card.metric("entropy").status == "measured"
    assert "learned sink included" in sink_card.metric("entropy").note
    assert "keys only" in sink_card.metric("distance").note
    assert sink_card.metric("sink").status == "measured"


def test_the_estimate_and_cancelling(bundled, corpus):
    sizes = [int(tokenize(bundled, t)[0].shape[1]) for t in TEXTS]
    small, large = atlas_estimate(bundled, sizes[:1]), atlas_estimate(bundled, sizes)
    assert 0 < small.seconds() < large.seconds()
    assert large.peak_bytes > moments_bytes(bundled.facts) > 0

    def stop(fraction: float, text: str) -> None:
        if "peaks and moments" in text:
            raise Cancelled("stopped")

    with pytest.raises(Cancelled):
        compute_atlas(bundled, corpus, repeated=REPEATED, progress=stop)
    assert not bundled.lock.locked()


def test_an_encoder_atlas(minilm):
    texts = ("The cat sat on the mat.", "A dog ran after the ball in the park.")
    atlas = compute_atlas(minilm, Corpus("two", texts, "two sentences"), repeated=REPEATED)
    distance = atlas.measures["distance"].values
    assert (distance < 0).any()  # some encoder heads look ahead on balance
    card = head_card(atlas, Head(0, 0))
    assert card.metric("entropy").status == "measured" and card.lowrank[1].owner is None


@pytest.mark.slow
def test_shared_key_heads_of_smollm2(smollm2):
    texts = ("The ferry leaves the harbour at seven.", "Rain fell on the quiet town all night.")
    atlas = compute_atlas(smollm2, Corpus("two", texts, "two sentences"), repeated=REPEATED)
    assert atlas.lowrank["key"].directions.shape[:2] == (30, 3)
    assert atlas.lowrank["query"].directions.shape[:2] == (30, 9)
    card = head_card(atlas, Head(5, 4))
    keys = card.lowrank[1]
    assert keys.owner == 1 and atlas.lowrank["key"].shared  # 9 query heads, 3 key heads
    x = torch.cat([cached(smollm2, t, "blocks.5.attn.hook_k")[1:, 1] for t in texts])
    s = torch.linalg.svdvals(x - x.mean(0))
    np.testing.assert_allclose(
        atlas.lowrank["key"].variance[5, 1], (s[:4] ** 2 / (x.shape[0] - 1)).numpy(), rtol=1e-5
    )


def test_a_measure_joining_later_replaces_its_not_measured_note(atlas):
    """Ablation importance and DLA join a finished atlas; its notes then say what they were
    measured on, and no longer that they were not measured (the page showed both)."""
    assert "ablation importance not measured" in atlas.notes
    assert "direct logit attribution not measured" in atlas.notes
    shape = (atlas.facts.n_layers, atlas.facts.n_heads)
    dla = with_dla(atlas, np.ones(shape), "the copying task")
    assert "direct logit attribution on the copying task" in dla.notes
    assert not [n for n in dla.notes if n.endswith("not measured") and "logit" in n]
    assert "ablation importance not measured" in dla.notes
    again = with_dla(dla, np.zeros(shape), "IOI")  # a later task replaces the earlier one
    assert [n for n in again.notes if n.startswith("direct logit")] == [
        "direct logit attribution on IOI"
    ]
    assert len(again.notes) == len(atlas.notes)


def block_max(pattern: np.ndarray, side: int, causal: bool) -> np.ndarray:
    """Max over each block of a ``... q k`` pattern by loops (NaN where no key is visible)."""
    n = pattern.shape[-1]
    block = -(-n // side)
    pixels = -(-n // block)
    out = np.full((*pattern.shape[:-2], pixels, pixels), np.nan)
    for i in range(pixels):
        for j in range(pixels):
            q = np.arange(i * block, min((i + 1) * block, n))[:, None]
            k = np.arange(j * block, min((j + 1) * block, n))[None, :]
            seen = (k <= q) if causal else np.ones((q.size, k.size), dtype=bool)
            if seen.any():
                cell = pattern[..., q, k]
                out[..., i, j] = np.where(seen, cell, -np.inf).max(axis=(-2, -1))
    return out


def test_each_heads_picture_is_its_pattern_on_the_longest_text(bundled, atlas):
    """The map's pictures: every head's captured pattern on the longest text, masked where a
    query cannot see, max-pooled to at most 32 pixels."""
    longest = int(np.argmax([len(t) for t in atlas.tokens]))
    assert atlas.pictured == longest
    pattern = capture(bundled, TEXTS[longest]).patterns.astype(np.float64)
    want = block_max(pattern, PICTURE, causal=True)
    assert atlas.pictures.shape == want.shape == (*pattern.shape[:2], *want.shape[-2:])
    np.testing.assert_allclose(atlas.pictures, want, atol=1e-6)  # NaN where NaN


@pytest.mark.parametrize(("n", "causal"), [(70, True), (100, False), (32, True)])
def test_a_picture_pools_blocks_of_the_pattern(n, causal):
    rng = np.random.default_rng(n)
    weights = rng.random((3, n, n))
    got = pooled(torch.from_numpy(weights), causal)
    want = block_max(weights.astype(np.float32).astype(np.float64), PICTURE, causal)
    assert got.shape == want.shape and got.shape[-1] <= PICTURE
    np.testing.assert_allclose(got, want, atol=1e-7)
