"""The explorer's view as a value: every transition checked directly, without AppTest."""

from dataclasses import replace

from models.head import Head
from ui.state import explorer as state
from ui.state.explorer import WINDOW, ExplorerView, RunShape

LONG = RunShape(n_layers=30, n_heads=9, n_tokens=2014, run_id="passage twice")
SHORT = RunShape(n_layers=3, n_heads=4, n_tokens=12, run_id="short")


def induction(head: Head, token: int) -> int:
    """An induction head on a passage written twice: query t attends to t - 1000 + 1."""
    return max(token - 1000 + 1, 1)


def test_a_new_prompt_opens_on_its_last_token_with_the_stripe_in_view():
    before = ExplorerView(head=Head(18, 6), token=20, run_id="the previous prompt")
    view, notes = state.for_run(before, LONG, induction)
    assert view.token == 2013 and not notes
    assert view.token in view.rows(LONG)
    assert induction(view.head, view.token) in view.cols(LONG)  # the stripe, 1,000 tokens back


def test_the_same_prompt_keeps_the_view():
    view, _ = state.for_run(ExplorerView(), LONG, induction)
    moved = replace(view, token=1500, row0=1400, col0=450)
    again, _ = state.for_run(moved, LONG, induction)
    assert again == moved


def test_a_links_token_is_kept_on_the_first_run():
    view, notes = state.for_run(ExplorerView(head=Head(2, 2), token=5), SHORT, induction)
    assert view.token == 5 and view.head == Head(2, 2) and not notes


def test_clicking_a_token_brings_its_row_and_its_target_into_the_window():
    view, _ = state.for_run(ExplorerView(), LONG, induction)
    clicked = state.choose_token(view, 1300, LONG, induction)
    assert 1300 in clicked.rows(LONG) and induction(clicked.head, 1300) in clicked.cols(LONG)


def test_a_click_inside_the_window_moves_nothing():
    view, _ = state.for_run(ExplorerView(), LONG, induction)
    inside = state.choose_token(view, view.token - 3, LONG, induction)
    assert (inside.row0, inside.col0) == (view.row0, view.col0)


def test_out_of_range_values_are_clamped_with_notes():
    view, notes = state.clamp(ExplorerView(head=Head(99, -1), token=10**6), SHORT)
    assert view.head == Head(2, 0) and view.token == 11 and len(notes) == 3


def test_an_overview_click_centres_the_window_and_a_drag_starts_it_there():
    view = ExplorerView(token=100)
    clicked = state.pick_overview(view, LONG, 1000, 1001, 500, 501)
    assert clicked.row0 == 1000 - WINDOW // 2 and clicked.col0 == 500 - WINDOW // 2
    dragged = state.pick_overview(view, LONG, 300, 380, 40, 90)
    assert (dragged.row0, dragged.col0) == (300, 40)
    at_end = state.pick_overview(view, LONG, 2013, 2013, 2013, 2013)
    assert at_end.row0 == LONG.n_tokens - WINDOW


def test_jump_centres_the_keys_on_the_strongest_one():
    view = ExplorerView(token=1900, row0=1850, col0=0)
    jumped = state.jump_to_strongest(view, LONG, induction)
    assert jumped.col0 == induction(view.head, 1900) - WINDOW // 2


def test_a_short_prompt_has_one_window():
    view, _ = state.for_run(ExplorerView(), SHORT, induction)
    assert view.rows(SHORT) == range(12) and view.cols(SHORT) == range(12)
    assert state.choose_head(view, Head(1, 1), SHORT, induction).row0 == 0
