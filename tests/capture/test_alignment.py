"""Aligning two prompts like a diff, checked on hand-made token lists."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.capture import alignment
from models.capture.alignment import (
    SECONDS_PER_PAIR,
    Alignment,
    AlignmentTooCostly,
    NothingAligned,
    align,
    aligned_labels,
    alignment_seconds,
    equal_pairs,
    spans,
)


def pairs(al: Alignment) -> list[tuple[int, int]]:
    return list(zip(al.positions("a").tolist(), al.positions("b").tolist(), strict=True))


def test_equal_lengths_align_position_by_position_whatever_the_tokens():
    al = align([1, 2, 3, 4], [1, 9, 3, 8])
    assert al.by_position and not al.has_bin and al.n_aligned == 4 and al.n_keys == 4
    assert pairs(al) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert al.unaligned("a") == al.unaligned("b") == ()
    assert "Equal lengths (4 tokens)" in al.describe()


def test_a_word_that_changes_length_twice_aligns_everything_else():
    # "x y W z w W v": the word W (one token, 20) becomes two tokens (30 31) in both places.
    a = [10, 11, 20, 12, 13, 20, 14]
    b = [10, 11, 30, 31, 12, 13, 30, 31, 14]
    al = align(a, b)
    assert al.matches == ((0, 0, 2), (3, 4, 2), (6, 8, 1))
    assert pairs(al) == [(0, 0), (1, 1), (3, 4), (4, 5), (6, 8)]
    assert al.unaligned("a") == (range(2, 3), range(5, 6))
    assert al.unaligned("b") == (range(2, 4), range(6, 8))
    assert al.bin_index == 2 and al.n_keys == 6
    assert al.key_positions("a") == [0, 1, None, 3, 4, 6]
    assert al.key_positions("b") == [0, 1, None, 4, 5, 8]
    assert al.bin_position("a") == 2 and al.bin_position("b") == 2
    assert al.describe() == (
        "5 of A's 7 tokens and of B's 9 aligned (like a diff, on the blocks they share); "
        "unaligned: A 2, 5; B 2–3, 6–7."
    )


def test_an_insertion_at_the_start_aligns_all_of_a():
    al = align([1, 2, 3], [7, 8, 1, 2, 3])
    assert pairs(al) == [(0, 2), (1, 3), (2, 4)]
    assert al.unaligned("a") == () and al.unaligned("b") == (range(2),)
    assert al.bin_index == 0 and al.key_positions("b") == [None, 2, 3, 4]
    assert "unaligned: A none; B 0–1." in al.describe()
    # B's inserted tokens lie before every aligned query: the bin is visible to all of them.
    np.testing.assert_array_equal(
        al.visible(causal=True),
        [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
    )


def test_common_prefix_and_suffix_are_taken_before_the_diff():
    # All ones but one 2 inserted in B: a plain diff could pair A's ones with B's tail; the
    # common prefix and suffix keep them where they are.
    al = align([1] * 6, [1, 1, 1, 2, 2, 1, 1, 1])
    assert pairs(al) == [(0, 0), (1, 1), (2, 2), (3, 5), (4, 6), (5, 7)]
    assert al.unaligned("b") == (range(3, 5),)


def test_nothing_in_common_is_a_user_error():
    with pytest.raises(NothingAligned, match="no token in common"):
        align([1, 2], [3, 4, 5])


def test_bin_keys_pools_every_unaligned_key_and_rows_still_sum_to_one():
    al = align([10, 11, 20, 12, 13, 20, 14], [10, 11, 30, 31, 12, 13, 30, 31, 14])
    row_a = np.array([0.05, 0.1, 0.2, 0.15, 0.1, 0.3, 0.1])
    row_b = np.array([0.1, 0.1, 0.05, 0.05, 0.2, 0.1, 0.1, 0.2, 0.1])
    # aligned keys A 0 1 3 4 6, the bin (A 2 + 5; B 2 + 3 + 6 + 7) at index 2
    np.testing.assert_allclose(al.bin_keys(row_a, "a"), [0.05, 0.1, 0.5, 0.15, 0.1, 0.1])
    np.testing.assert_allclose(al.bin_keys(row_b, "b"), [0.1, 0.1, 0.4, 0.2, 0.1, 0.1])
    # A causal band holding only the keys up to its last query: aligned index 3 (A 4, B 5)
    # reads keys A 0..4 and B 0..5; both sides keep aligned keys 0..3 and the bin.
    got_a, got_b = al.bin_keys(row_a[:5], "a"), al.bin_keys(row_b[:6], "b")
    np.testing.assert_allclose(got_a, [0.05, 0.1, 0.2, 0.15, 0.1])
    np.testing.assert_allclose(got_b, [0.1, 0.1, 0.1, 0.2, 0.1])


def test_visibility_of_the_bin_follows_the_first_unaligned_key_of_either_side():
    al = align([10, 11, 20, 12, 13, 20, 14], [10, 11, 30, 31, 12, 13, 30, 31, 14])
    seen = al.visible(causal=True)
    assert seen.shape == (5, 6)
    np.testing.assert_array_equal(seen[:, 2], [False, False, True, True, True])
    np.testing.assert_array_equal(np.delete(seen, 2, axis=1), np.tril(np.ones((5, 5), bool)))
    assert al.visible(causal=False).all()


def test_labels_name_both_positions_and_the_bin():
    al = align(list("sxpqe"), list("sxre"))
    labels = aligned_labels(al, ["s", "x", "p", "q", "e"], ["s", "x", "r", "e"], keys=True)
    assert labels == ["(0) s", "(1) x", "[unaligned: A 2–3; B 2]", "(4) e / (3) e"]


def test_spans_are_inclusive_and_long_lists_are_counted():
    assert spans([range(6, 9), range(45, 48)]) == "6–8, 45–47"
    assert spans([]) == "none" and spans([range(3, 4)]) == "3"
    assert spans([range(i, i + 1) for i in range(0, 20, 2)], most=2) == "0, 2 and 8 more"


def test_blocks_out_of_order_are_refused():
    with pytest.raises(ValueError):
        Alignment(5, 6, ((0, 0, 3), (2, 4, 1)))
    with pytest.raises(ValueError):
        Alignment(5, 6, ((0, 0, 6),))


@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=30),
    st.lists(st.integers(0, 3), min_size=1, max_size=30),
)
def test_every_aligned_pair_holds_the_same_token_in_order(a, b):
    if len(a) == len(b):
        return
    try:
        al = align(a, b)
    except NothingAligned:
        assert not set(a) & set(b)
        return
    found = pairs(al)
    assert all(a[i] == b[j] for i, j in found)
    assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in itertools.pairwise(found))
    covered_a = {i for g in al.unaligned("a") for i in g} | {i for i, _ in found}
    assert covered_a == set(range(len(a))) and al.n_keys == len(found) + 1
    assert sum(al.bin_keys(np.ones(len(a)) / len(a), "a")) == pytest.approx(1.0)


def test_equal_pairs_count_equal_items_between_the_common_ends_by_hand():
    # common prefix [7], common suffix [9]; middles [1, 2, 1] and [2, 1, 1, 1, 2]:
    # each of A's two 1s meets B's three (6 pairs), A's 2 meets B's two (2 pairs)
    assert equal_pairs([7, 1, 2, 1, 9], [7, 2, 1, 1, 1, 2, 9]) == 8
    assert equal_pairs([1, 2, 3], [4, 5, 6]) == 0  # equal lengths align by position: no search
    assert equal_pairs([1, 2], [1, 2, 3]) == 0  # nothing between the common ends
    assert alignment_seconds(10**6) == pytest.approx(10**6 * SECONDS_PER_PAIR)


def test_an_alignment_over_the_limit_is_refused_before_it_starts(monkeypatch):
    a, b = [0, 1] * 30, [1, 0] * 31  # 60 and 62 items of two kinds: 30*31*2 = 1,860 pairs
    assert equal_pairs(a, b) == 1_860
    monkeypatch.setattr(alignment, "MAX_EQUAL_PAIRS", 1_859)

    def never(*_args):
        raise AssertionError("the diff ran")

    monkeypatch.setattr(alignment, "matching_blocks", never)
    with pytest.raises(AlignmentTooCostly, match="1,860 pairs of equal words") as err:
        align(a, b, "words")
    assert "same length" in str(err.value) and err.value.level == "warning"
    monkeypatch.setattr(alignment, "MAX_EQUAL_PAIRS", 1_860)
    with pytest.raises(AssertionError, match="the diff ran"):  # at the limit it runs
        align(a, b)
