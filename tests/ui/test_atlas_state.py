"""The Atlas page's state: a head the model lacks is dropped, transitions keep the rest (its
link is tested with every page's, in test_links)."""

from models.head import Head
from ui.state.atlas import AtlasView, axis_label, clamp, select, with_axes


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
