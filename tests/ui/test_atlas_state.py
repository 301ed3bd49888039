"""The Atlas page's state: links parse, clamp and round-trip; bad input becomes notes."""

from models.head import Head
from ui.state.atlas import AtlasView, axis_label, clamp, from_query, select, to_query, with_axes


def test_a_link_round_trips():
    view = AtlasView("distance", "sink", None, "activation", Head(3, 1))
    query = to_query(view)
    assert query == {
        "ax": "distance",
        "ay": "sink",
        "ac": "",
        "as": "activation",
        "layer": "3",
        "head": "1",
    }
    assert from_query(query) == (view, [])


def test_an_empty_link_gives_the_defaults():
    view, notes = from_query({})
    assert view == AtlasView() and notes == []
    assert (view.x, view.y, view.colour, view.size, view.head) == (
        "entropy",
        "previous_token",
        "induction",
        None,
        None,
    )


def test_garbage_becomes_notes():
    view, notes = from_query({"ax": "<script>", "ay": "", "ac": "nope", "layer": "x", "head": "1"})
    assert view.x == "entropy" and view.y == "previous_token" and view.colour == "induction"
    assert view.head is None and len(notes) == 4
    assert "ax='<script>'" in notes[0]


def test_a_head_outside_the_model_is_dropped():
    view, notes = clamp(AtlasView(head=Head(40, 0)), n_layers=30, n_heads=9)
    assert view.head is None and "40.0" in notes[0]
    kept, none = clamp(AtlasView(head=Head(29, 8)), 30, 9)
    assert kept.head == Head(29, 8) and none == []


def test_transitions_keep_what_they_do_not_change():
    view = select(AtlasView(), Head(1, 2))
    moved = with_axes(view, "sink", "entropy", None, "ov_copying")
    assert moved.head == Head(1, 2) and moved.columns() == ("sink", "entropy", None, "ov_copying")
    assert select(moved, None).head is None


def test_axis_labels_name_the_unit():
    assert axis_label("entropy") == "Entropy (nats)" and axis_label(None) == "none"
    assert axis_label("previous_token") == "Previous token"
