"""Property tests: nothing a user types or puts in a link lets an exception escape."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.capture.run import capture
from models.errors import PromptError
from tests.app.helpers import open_app
from ui import links
from ui.state.explorer import RunShape, clamp

query_values = st.one_of(st.text(max_size=12), st.integers(-(10**6), 10**6).map(str))
LINK_KEYS = ("layer", "head", "token", "span", "scale", "range", "by", "dir", "weighted", "dtype")
optional_keys = dict.fromkeys(LINK_KEYS, query_values)
queries = st.fixed_dictionaries({}, optional=optional_keys)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(queries, st.integers(1, 48), st.integers(1, 32), st.integers(1, 600))
def test_any_query_string_parses_into_range(query, n_layers, n_heads, n_tokens):
    view = links.parse(query, {}.get).explorer
    fixed, _ = clamp(view, RunShape(n_layers, n_heads, n_tokens))
    assert 0 <= fixed.head.layer < n_layers and 0 <= fixed.head.index < n_heads
    assert fixed.token is None or 0 <= fixed.token < n_tokens
    assert fixed.span is None or 0 <= fixed.span[0] < fixed.span[1] <= n_tokens


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=300))
def test_any_prompt_gives_patterns_or_a_message(bundled, prompt):
    try:
        run = capture(bundled, prompt)
    except PromptError as err:
        assert str(err)
        return
    assert run.n_tokens >= 1 and len(run.tokens) == run.n_tokens
    np.testing.assert_allclose(run.patterns.sum(-1), 1.0, atol=1e-5)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80), queries)
def test_app_survives_any_prompt_and_link(prompt, query):
    query = {**query, "model": "bundled", "prompt": prompt}
    at = open_app(**query)
    assert not at.exception
