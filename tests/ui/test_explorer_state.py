"""The explorer's view as a value: every transition checked directly, without AppTest."""

from dataclasses import replace

from models.capture.words import unit_range
from models.head import Head
from models.model.spec import ModelSpec
from ui.runtime.job_keys import CompareKey, RunKey
from ui.runtime.policy import admit
from ui.runtime.settings import Settings
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


def test_a_span_is_kept_in_order_and_a_plain_click_ends_it():
    view, _ = state.for_run(ExplorerView(), SHORT, induction)
    spanned = state.choose_span(view, 8, 3, SHORT, induction)  # bounds in either order
    assert spanned.span == (3, 8) and spanned.token == 3
    assert state.selection(spanned) == (3, 8)
    assert state.choose_head(spanned, Head(1, 2), SHORT, induction).span == (3, 8)
    clicked = state.choose_token(spanned, 5, SHORT, induction)
    assert clicked.span is None and state.selection(clicked) == (5, 6)


def test_a_span_of_one_token_is_a_plain_selection_and_spans_are_clamped():
    view, _ = state.for_run(ExplorerView(), SHORT, induction)
    one = state.choose_span(view, 4, 5, SHORT, induction)
    assert one.span is None and one.token == 4
    assert state.choose_span(view, 9, 40, SHORT, induction).span == (9, 12)


def test_a_span_brings_its_first_token_into_a_long_window():
    view, _ = state.for_run(ExplorerView(), LONG, induction)
    spanned = state.choose_span(view, 300, 320, LONG, induction)
    assert spanned.span == (300, 320) and 300 in spanned.rows(LONG)


def test_a_new_prompt_drops_the_span_but_keeps_mode_words_and_prompt_b():
    view, _ = state.for_run(ExplorerView(), SHORT, induction)
    view = state.set_words(state.set_prompt_b(state.set_mode(view, "compare"), "b text"), True)
    view = state.choose_span(view, 2, 6, SHORT, induction)
    other = RunShape(3, 4, 20, run_id="another prompt")
    moved, _ = state.for_run(view, other, induction)
    assert moved.span is None and moved.token == 19
    assert (moved.mode, moved.prompt_b, moved.words) == ("compare", "b text", True)


def test_switching_mode_or_word_view_never_moves_the_window():
    view, _ = state.for_run(ExplorerView(), LONG, induction)
    window = (view.row0, view.col0, view.token, view.head)
    for changed in (state.set_mode(view, "compare"), state.set_words(view, True)):
        assert (changed.row0, changed.col0, changed.token, changed.head) == window
    assert state.set_mode(state.set_mode(view, "compare"), "single") == view


def words_of(starts):
    from models.capture.words import Words

    return Words(tuple(starts), tuple(f"w{i}" for i in range(len(starts) - 1)), "markers")


def test_the_word_view_shows_the_words_that_overlap_the_token_window():
    words = words_of([0, 1, 3, 4, 7, 10])  # five words over ten tokens
    assert unit_range(range(2, 6), words) == range(1, 4)
    assert unit_range(range(2, 6), None) == range(2, 6)
    assert state.unit_of(5, words) == 3 and state.unit_of(5, None) == 5


def test_aligned_windows_skip_the_unaligned_middle():
    # A has 10 units, B 11: prefix 4, suffix 5, A's middle is unit 4, B's units 4-5.
    queries = [0, 1, 2, 3, 5, 6, 7, 8, 9]
    keys = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # the bin stands at A's first middle unit, 4
    assert state.aligned_range(queries, range(10)) == range(9)
    assert state.aligned_range(queries, range(3, 7)) == range(3, 6)  # units 3, 5, 6
    assert state.aligned_range(keys, range(4, 6)) == range(4, 6)  # the bin and unit 5
    assert state.aligned_index(queries, 6) == 5 and state.aligned_index(queries, 4) is None


def test_centring_on_a_cell_selects_its_query_and_shows_its_key():
    view, _ = state.for_run(ExplorerView(), LONG, induction)
    view = state.choose_span(view, 10, 20, LONG, induction)
    moved = state.centre_on(view, LONG, 1500, 40)
    assert moved.token == 1500 and moved.span is None
    assert 1500 in moved.rows(LONG) and 40 in moved.cols(LONG)
    assert moved.row0 == 1500 - WINDOW // 2 and moved.col0 == 0


def test_which_tokens_attend_to_it_brings_the_tokens_column_into_the_window():
    view, _ = state.for_run(ExplorerView(), LONG, induction)
    assert 1300 not in view.cols(LONG)  # the window opens on the stripe 1,000 tokens back
    view = replace(view, token=1300, row0=1250)
    turned = state.set_direction(view, "to", LONG, induction)
    assert turned.direction == "to"
    assert 1300 in turned.cols(LONG) and 1300 in turned.rows(LONG)
    assert turned.col0 == 1300 - WINDOW // 2
    back = state.choose_token(turned, 1400, LONG, induction)
    assert 1400 in back.cols(LONG)  # a new token keeps its column on screen


def _compare_key(prompt_b: str) -> CompareKey:
    spec = admit(ModelSpec("bundled"), Settings())
    return CompareKey(RunKey(spec, "a b c", None), RunKey(spec, prompt_b, None), words=False)


def test_asked_comparisons_accumulate_and_stay_out_of_the_link():
    first, second = _compare_key("a b d"), _compare_key("x y")
    view = state.ask_compare(state.ask_compare(ExplorerView(), first), second)
    assert view.compare_asked == frozenset({first, second})
    assert state.ask_compare(view, first).compare_asked == frozenset({first, second})
    assert ExplorerView().compare_asked == frozenset()
    assert {"compare_asked", "why_asked", "why_key"} <= ExplorerView.IN_SESSION


def test_why_here_transitions():
    view = ExplorerView(head=Head(1, 2), token=9, span=(3, 6))
    picked = state.pick_why_cell(view, query=4, key=2)
    assert (picked.token, picked.span, picked.why_key, picked.why_asked) == (4, None, 2, Head(1, 2))
    assert replace(picked, token=9, span=(3, 6), why_key=0, why_asked=None) == view
    typed = state.choose_why_key(view, 7)
    assert (typed.why_key, typed.token, typed.why_asked) == (7, 9, None)
    assert state.ask_why(view, Head(0, 3)).why_asked == Head(0, 3)


def test_the_why_key_is_kept_within_the_prompt():
    assert state.why_key(ExplorerView(), 5) == 0
    assert state.why_key(ExplorerView(why_key=3), 5) == 3
    assert state.why_key(ExplorerView(why_key=12), 5) == 4
    assert state.why_key(ExplorerView(why_key=-2), 5) == 0
