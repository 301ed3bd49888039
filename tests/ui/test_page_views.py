"""The Scaling, Kernel, Head finder and Classroom pages' state values: every transition checked
directly."""

import math
from dataclasses import replace

import numpy as np

from models.head import Head
from ui.state import classroom as cl
from ui.state import heads as hs
from ui.state import kernel as ks
from ui.state import scaling as sc
from ui.state.classroom import ClassroomView
from ui.state.heads import HeadsView
from ui.state.kernel import KernelView
from ui.state.scaling import ScalingView


def test_a_new_grid_starts_at_the_models_own_scale():
    view = sc.choose_point(ScalingView(), 3)
    assert sc.with_grid(view, "factor", 1 / 16, 16.0, 25) == view  # unchanged grid keeps it
    moved = sc.with_grid(view, "factor", 1 / 4, 16.0, 25)
    assert moved.pick is None and moved.low == 0.25
    found = sc.grid(moved, 64)
    assert sc.shown_point(moved, found) == found.own
    assert found.factors[found.own] == 1.0


def test_the_factor_grid_is_log_spaced_and_alpha_maps_to_d_k():
    found = sc.grid(ScalingView(points=5, low=0.25, high=4.0), 64)
    np.testing.assert_allclose(found.factors, [0.25, 0.5, 1.0, 2.0, 4.0], rtol=1e-12)
    assert found.log_x and found.own == 2
    alpha = sc.grid(ScalingView(axis="alpha", points=5), 64)
    # dividing by d_k^alpha instead of d_k^0.5 is a factor d_k^(0.5 - alpha) on the logits
    np.testing.assert_allclose(alpha.factors, [64**0.5 / 64**a for a in np.linspace(0, 1, 5)])
    assert alpha.own == 2 and not alpha.log_x


def test_clamp_fits_the_head_the_points_and_the_range():
    view = ScalingView(head=Head(9, 0), points=200, low=0.1, high=0.1, pick=7)
    fitted, notes = sc.clamp(view, 2, 4)
    assert fitted.head is None and fitted.points == sc.MAX_POINTS
    assert (fitted.low, fitted.high) == (1 / 16, 16.0) and fitted.pick is None
    assert len(notes) == 2
    even, _ = sc.clamp(ScalingView(points=10, low=0.3), 2, 4)
    assert even.points == 11 and even.low == 0.25  # odd; the nearest power of two
    same, notes = sc.clamp(ScalingView(head=Head(1, 3), pick=2), 2, 4)
    assert same == ScalingView(head=Head(1, 3), pick=2) and notes == []
    assert sc.nearest_power(math.nan) == sc.POWERS[0]


def test_a_point_outside_the_grid_falls_back_to_the_own_scale():
    view = ScalingView(points=5, pick=9)
    found = sc.grid(view, 16)
    assert sc.shown_point(view, found) == found.own
    assert sc.with_seed(view, 2**31 + 5).seed == 5  # seeds wrap at 2**31
    assert sc.head_shown(view) == Head(0, 0)


def test_the_kernel_view_picks_the_worst_head_until_one_is_chosen():
    heads = [Head(0, 0), Head(0, 1), Head(1, 0)]
    assert ks.shown_head(KernelView(), heads, Head(1, 0)) == Head(1, 0)
    chosen = ks.choose_head(KernelView(), Head(0, 1))
    assert ks.shown_head(chosen, heads, Head(1, 0)) == Head(0, 1)
    gone = ks.choose_head(KernelView(), Head(5, 5))
    assert ks.shown_head(gone, heads, Head(1, 0)) == Head(1, 0)
    half = ks.with_dtype(chosen, "float16")
    assert half.head == Head(0, 1)
    fitted, notes = ks.fit_dtype(half, ["float32"])
    assert fitted.dtype == "float32" and len(notes) == 1
    assert ks.fit_dtype(half, ["float32", "float16"]) == (half, [])


def test_the_heads_view_fits_the_corpus_the_context_and_the_model():
    view = HeadsView(texts=100, max_tokens=4, span=900, batch=1)
    fitted = hs.fit_repeats(hs.fit_corpus(view, 12, 1024), 1024)
    assert (fitted.texts, fitted.max_tokens) == (12, 8)
    assert (fitted.span, fitted.batch) == (hs.MAX_SPAN, 2)  # (1024 - 2) // 2 = 511 > 500
    assert hs.longest_span(64) == 31 and hs.longest_span(3) == 2
    pruned = hs.fit_pruning(HeadsView(prune_groups=9, prune_pick=(Head(0, 1), Head(7, 0))), 2, 4, 2)
    assert pruned.prune_groups == 1 and pruned.prune_pick == (Head(0, 1),)


def test_the_heads_view_chooses_by_model_size_until_told():
    small, big = hs.BIG_MODEL_HEADS, hs.BIG_MODEL_HEADS + 1
    assert hs.shown_ranking(HeadsView(), small) == "zero"
    assert hs.shown_ranking(HeadsView(), big) == "first_order"
    assert hs.shown_ablate(HeadsView(), small) and not hs.shown_ablate(HeadsView(), big)
    told = hs.with_importance(HeadsView(), "gradient", "mean", 300, True)
    assert hs.shown_ranking(told, small) == "gradient" and hs.shown_ablate(told, big)
    assert hs.shown_k(HeadsView(), 270) == 27 and hs.shown_k(HeadsView(), 5) == 1
    assert hs.shown_k(HeadsView(prune_k=900), 270) == 269


def test_a_new_example_score_starts_on_its_strongest_head():
    view = hs.choose_example(HeadsView(), HeadsView().example_score, Head(1, 2))
    assert view.example_head == Head(1, 2)
    other = hs.choose_example(view, "duplicate_token", Head(1, 2))
    assert other.example_score == "duplicate_token" and other.example_head is None
    kept = hs.with_pruning(view, "hand", None, 1, (Head(2, 0), Head(0, 1)), "bfloat16")
    assert kept.prune_pick == (Head(0, 1), Head(2, 0)) and kept.example_head == Head(1, 2)


def test_the_classroom_window_fits_the_model_and_the_prompt():
    wide = ClassroomView(head=Head(40, 12), start=100, width=20)
    # 30 layers x 9 heads, 15 tokens: the last head, 8 tokens at most, the last 8 of 15
    assert cl.fit(wide, 30, 9, 15) == replace(wide, head=Head(29, 8), start=7, width=8)
    # a 3-token prompt shows all three from the first
    assert cl.fit(wide, 30, 9, 3) == replace(wide, head=Head(29, 8), start=0, width=3)
    # no width chosen: as many as fit; a chosen start inside the prompt stays
    assert cl.fit(ClassroomView(start=4), 2, 2, 20).width == 8
    assert cl.fit(ClassroomView(start=4), 2, 2, 20).start == 4


def test_the_classroom_transitions_change_only_their_field():
    view = cl.with_example(ClassroomView(causal=True, start=3), "B")
    assert (view.q, view.k, view.v) == ("1, 0; 0, 1; 1, 1",) * 3 and view.causal
    view = cl.with_matrix(view, "k", "2, 0; 1, 1; 0, 0")
    assert (view.q, view.k) == ("1, 0; 0, 1; 1, 1", "2, 0; 1, 1; 0, 0")
    view = cl.with_width(cl.with_start(cl.with_head(cl.with_layer(view, 5), 2), 6), 4)
    assert (view.head, view.start, view.width, view.tab) == (Head(5, 2), 6, 4, "steps")
