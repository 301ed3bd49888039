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
    fixed, notes = clamp(ViewState(layer=9, head=-4, token=100), n_layers=3, n_heads=6, n_tokens=10)
    assert (fixed.layer, fixed.head, fixed.token) == (2, 0, 9)
    assert len(notes) == 3


def test_clamp_leaves_valid_values_alone():
    view = ViewState(layer=1, head=5, token=0)
    fixed, notes = clamp(view, 3, 6, 4)
    assert fixed == view and notes == []


def test_compare_mode_round_trips_both_prompts_and_the_word_view():
    view = ViewState(
        model="smollm2",
        prompt="Alice gave Bob a book",
        layer=4,
        head=1,
        token=3,
        mode="compare",
        prompt_b="Alice gave Carol a <book> & more",
        words=True,
    )
    query = to_query(view)
    assert query["mode"] == "compare" and query["b"] == view.prompt_b and query["words"] == "1"
    parsed, notes = from_query(query)
    assert parsed == view and notes == []


def test_a_long_prompt_b_travels_as_its_id():
    view = ViewState(prompt_id="0123456789abcdef", mode="compare", prompt_b_id="fedcba9876543210")
    query = to_query(view)
    assert query["bid"] == "fedcba9876543210" and "b" not in query and "prompt" not in query
    assert from_query(query)[0] == view


def test_prompt_b_is_left_out_of_a_single_mode_link():
    query = to_query(ViewState(prompt="a", prompt_b="b", prompt_b_id="0123456789abcdef"))
    assert "b" not in query and "bid" not in query and "mode" not in query
    assert "words" not in query


def test_garbage_mode_and_flag_are_dropped_with_notes():
    parsed, notes = from_query({"mode": "side-by-side", "words": "maybe", "b": "x"})
    assert parsed.mode == "single" and parsed.words is False and parsed.prompt_b == "x"
    assert len(notes) == 2 and "mode" in notes[0] and "words" in notes[1]
    assert from_query({"mode": "COMPARE", "words": "0"})[0].mode == "compare"
