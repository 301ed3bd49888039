from viz.view_state import ViewState, clamp, from_query, to_query


def test_round_trip_keeps_every_field():
    view = ViewState(model="gpt2", prompt="a <b> & 'c'", layer=3, head=7, token=12)
    parsed, notes = from_query(to_query(view))
    assert parsed == view and notes == []


def test_missing_fields_default():
    parsed, notes = from_query({})
    assert parsed == ViewState() and notes == []


def test_garbage_numbers_are_dropped_with_a_note():
    parsed, notes = from_query({"layer": "abc", "head": "2", "token": "1e3"})
    assert parsed.layer == 0 and parsed.head == 2 and parsed.token is None
    assert len(notes) == 2 and "layer" in notes[0] and "token" in notes[1]


def test_clamp_brings_values_in_range_and_says_so():
    fixed, notes = clamp(ViewState(layer=9, head=-4, token=100), n_layers=3, n_heads=6,
                         n_tokens=10)
    assert (fixed.layer, fixed.head, fixed.token) == (2, 0, 9)
    assert len(notes) == 3


def test_clamp_leaves_valid_values_alone():
    view = ViewState(layer=1, head=5, token=0)
    fixed, notes = clamp(view, 3, 6, 4)
    assert fixed == view and notes == []
