"""The Atlas page's state: a head the model lacks is dropped, transitions keep the rest (its
link is tested with every page's, in test_links)."""

from models.head import Head
from ui.state.atlas import (
    AtlasView,
    axis_label,
    clamp,
    fit_corpus,
    noted,
    select,
    with_axes,
    with_max_tokens,
    with_texts,
)


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


def test_the_corpus_size_starts_at_the_defaults_and_fits_the_corpus_and_model():
    assert fit_corpus(AtlasView(), n_texts=48, n_ctx=1024) == AtlasView(texts=24, max_tokens=256)
    assert fit_corpus(AtlasView(), n_texts=10, n_ctx=128) == AtlasView(texts=10, max_tokens=128)
    typed = with_max_tokens(with_texts(AtlasView(head=Head(1, 2)), 40), 4)
    assert (typed.texts, typed.max_tokens, typed.head) == (40, 4, Head(1, 2))
    assert fit_corpus(typed, n_texts=30, n_ctx=512) == AtlasView(
        head=Head(1, 2), texts=30, max_tokens=8
    )
    assert fit_corpus(AtlasView(texts=0, max_tokens=600), 5, 512).texts == 1
    assert fit_corpus(AtlasView(texts=0, max_tokens=600), 5, 512).max_tokens == 512


def test_the_links_notes_are_marked_shown_and_the_session_fields_stay_out_of_the_link():
    assert noted(AtlasView(x="sink")) == AtlasView(x="sink", notes_shown=True)
    assert {"texts", "max_tokens", "notes_shown"} == AtlasView.IN_SESSION
