"""The explorer's whole-pattern CSV holds what the view draws: a linear-attention head's
mixing matrix (its store slot holds zeros no view reads), checked against transformers' own
delta rule."""

from __future__ import annotations

import csv
import io

import numpy as np
import torch

from models.capture.run import capture
from models.head import Head
from models.model.spec import ModelSpec
from tests.attention.tiny_variants import PROMPT
from tests.model.variant_reference import mixing_inside_transformers
from ui.runtime import server
from ui.runtime.job_keys import RunKey
from ui.runtime.policy import admit
from ui.runtime.settings import Settings
from ui.sections.explorer_detail import whole_csv


def read(text: str) -> np.ndarray:
    rows = list(csv.reader(io.StringIO(text)))[1:]
    return np.array([[float(c) if c else np.nan for c in row[1:]] for row in rows])


def test_a_linear_heads_csv_is_its_mixing_matrix(tiny_variants):
    model = tiny_variants.model("qwen3_next")
    run = capture(model, PROMPT)
    key = RunKey(admit(ModelSpec("bundled"), Settings()), "qwen3-next csv", None)
    server.current().results.put(key, run)
    last = run.heads_in(0) - 1
    assert run.signed(0) and last >= run.facts.n_heads  # a value head past the softmax heads
    got = read(whole_csv(key, Head(0, last)))
    want = mixing_inside_transformers(
        tiny_variants.path("qwen3_next"), torch.tensor([run.token_ids])
    )
    want = want[last].numpy()
    lower = np.tril(np.ones_like(want, dtype=bool))
    np.testing.assert_allclose(got[lower], want[lower], atol=1e-5, rtol=1e-5)  # 6 digits written
    assert np.isnan(got[~lower]).all() and np.abs(want[lower]).max() > 1e-3
