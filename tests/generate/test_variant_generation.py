"""Generation and eviction on attention variants, against transformers run here: gpt-oss's
learned sinks (rows plus sink make 1; the sink is a softmax term no eviction removes), Gemma 2's
soft-capped logits (run through the model's own eager attention) and DeepSeek-V3's latent
attention (keys wider than the values)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.attention.options import AttentionOptions
from models.generate.eviction import full_pass, perplexity, policy_pass
from models.generate.generation import generate
from models.generate.policies import banded, heavy_hitters
from models.generate.settings import GenerationSettings
from models.model.forward import tokenize
from tests.attention.tiny_variants import PROMPT
from tests.model.variant_reference import eager, hf_attentions

N_NEW = 6


@pytest.mark.parametrize("name", ["gpt_oss", "gemma2", "deepseek_v3"])
def test_greedy_tokens_and_last_rows_equal_transformers(tiny_variants, name):
    """The written tokens are transformers' own greedy ``generate`` (eager attention); the last
    step's rows are its eager weights of the last query, and with a learned sink each row
    lacks exactly the sink's weight of 1."""
    model, path = tiny_variants.model(name), tiny_variants.path(name)
    ids = tokenize(model, PROMPT)[0]
    gen = generate(model, PROMPT, GenerationSettings(max_new_tokens=N_NEW))
    hf = eager(path)
    with torch.no_grad():
        want = hf.generate(ids, max_new_tokens=N_NEW, do_sample=False, pad_token_id=0)
    assert list(gen.ids) == want[0].tolist()
    fed = torch.tensor([gen.ids[:-1]])  # the last token written is never fed back
    weights = hf_attentions(path, fed)
    rows = gen.rows(N_NEW - 1)  # layer head key
    for layer, found in enumerate(weights):
        np.testing.assert_allclose(rows[layer], found[0, :, -1].numpy(), atol=2e-5)
    if name == "gpt_oss":
        sink = 1 - rows.sum(-1)
        assert sink.max() > 1e-3 and sink.min() > -1e-5  # HF puts that share on its sink


def plain_window(q, k, v, scale, budget, sink):
    """Query by query: softmax over the last ``budget`` keys and the sink logit, the sink's
    share dropped before the values (plain loops, one head and one key/value head)."""
    out = []
    for i in range(q.shape[0]):
        keys = range(max(0, i - budget + 1), i + 1)
        logits = torch.stack([q[i] @ k[j] * scale for j in keys] + [sink])
        p = torch.softmax(logits, dim=0)[:-1]
        out.append(sum(p[n] * v[j] for n, j in enumerate(keys)))
    return torch.stack(out)


def test_a_learned_sink_is_never_evicted_and_takes_no_slot():
    """The window policy with a learned sink: each query sees its last ``budget`` keys plus the
    sink, whatever the budget (the hand loop above); H2O with the budget at the length is the
    full cache, sink included."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 20, 8, generator=gen) for _ in range(3))
    sink, terms = torch.tensor([1.5]), AttentionOptions(causal=True, scale=8**-0.5)
    got = banded(q, k, v, 0, terms, "window", 5, learned_sink=sink)
    want = plain_window(q[0], k[0], v[0], 8**-0.5, 5, sink[0])
    torch.testing.assert_close(got[0], want, atol=1e-5, rtol=1e-5)
    full = banded(q, k, v, 0, terms, "full", 20, learned_sink=sink)
    torch.testing.assert_close(full[0], plain_window(q[0], k[0], v[0], 8**-0.5, 20, sink[0]))
    h2o = heavy_hitters(q, k, v, 0, terms, 20, learned_sink=sink)
    torch.testing.assert_close(h2o, full, atol=1e-5, rtol=1e-5)
    without = banded(q, k, v, 0, terms, "window", 5)
    assert float((without - got).abs().max()) > 1e-2  # the sink matters


def test_gpt_oss_full_cache_equals_plain_perplexity_and_budgets_bite(tiny_variants):
    model, path = tiny_variants.model("gpt_oss"), tiny_variants.path("gpt_oss")
    ids = tokenize(model, PROMPT + " " + PROMPT)[0]
    with torch.no_grad():
        plain = float(torch.exp(eager(path)(ids, labels=ids).loss))
    full = full_pass(model, ids).losses
    assert perplexity(full) == pytest.approx(plain, rel=1e-5)
    bounded = policy_pass(model, ids, "window", 10)
    np.testing.assert_allclose(bounded[:10].numpy(), full[:10].numpy(), atol=5e-5)
    assert float((bounded[10:] - full[10:]).abs().max()) > 1e-4


def test_each_steps_learned_sink_share_is_what_hf_puts_on_the_sink(tiny_variants):
    """gpt-oss: every step's learned-sink share is one minus transformers' eager row sum at
    that query, and prompt, output and sink shares add to 1; a model without sinks has none."""
    model, path = tiny_variants.model("gpt_oss"), tiny_variants.path("gpt_oss")
    gen = generate(model, PROMPT, GenerationSettings(max_new_tokens=N_NEW))
    fed = torch.tensor([gen.ids[:-1]])
    weights = hf_attentions(path, fed)
    for step in range(N_NEW):
        query = gen.n_prompt - 1 + step
        want = np.stack([1 - w[0, :, query].double().numpy().sum(-1) for w in weights])
        np.testing.assert_allclose(gen.learned_sink[step], want, atol=2e-5)
    total = gen.prompt_share + gen.output_share + gen.learned_sink
    np.testing.assert_allclose(total, 1.0, atol=1e-6)
    assert (
        generate(tiny_variants.model("gemma3"), PROMPT, GenerationSettings(2)).learned_sink is None
    )
