"""The Generate page's settings travel in a link as the core's parameters, untouched here."""

from viz.view_state import GEN_KEYS, QUERY_KEYS, ViewState, from_query, to_query

SAMPLED = (
    ("n", "40"),
    ("chat", "1"),
    ("decoding", "sample"),
    ("temp", "0.8"),
    ("top_k", "50"),
    ("top_p", "0.95"),
    ("seed", "7"),
)


def test_generation_parameters_round_trip_and_are_left_out_when_unset():
    view = ViewState(model="smollm2", prompt="hi", layer=3, head=1, gen=SAMPLED)
    query = to_query(view)
    assert {k: query[k] for k in GEN_KEYS} == dict(SAMPLED)
    assert set(GEN_KEYS) <= set(QUERY_KEYS)
    again, notes = from_query(query)
    assert again == view and not notes
    assert not set(GEN_KEYS) & set(to_query(ViewState()))
    assert from_query({"layer": "1"})[0].gen is None
    assert from_query({"n": "5"})[0].gen == (("n", "5"),)
