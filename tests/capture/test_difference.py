"""One head of a two-prompt comparison: A, B and A − B on positions aligned like a diff."""

import numpy as np

from models.capture.compare import align_runs
from models.capture.difference import aligned_rows, difference_window
from models.capture.run import capture
from tests.capture.test_compare import CODE_A, CODE_B


def test_difference_window_is_the_patterns_on_aligned_rows_and_keys(bundled):
    run_a, run_b = capture(bundled, CODE_A), capture(bundled, CODE_B)
    al = align_runs(run_a, run_b)
    assert al.bin_index == 6  # the bin stands where the first rename is, after "(5) _"
    qa, qb = al.positions("a"), al.positions("b")
    layer, head = 1, 2
    pa, pb = run_a.pattern(layer, head), run_b.pattern(layer, head)
    a, b, diff = difference_window(run_a, run_b, al, layer, head, slice(None), slice(None))
    assert a.shape == (72, 73)
    # Aligned keys: the pattern's cells at the pairs (NaN above the diagonal, causal).
    np.testing.assert_allclose(
        np.delete(a, 6, axis=1),
        np.where(np.tril(np.ones((72, 72), bool)), pa[np.ix_(qa, qa)], np.nan),
        atol=1e-7,
    )
    np.testing.assert_allclose(
        np.delete(b, 6, axis=1),
        np.where(np.tril(np.ones((72, 72), bool)), pb[np.ix_(qb, qb)], np.nan),
        atol=1e-7,
    )
    # The bin: the sum over A's keys 6-8 and 45-47 (B's 6-7 and 44-45), blank before the rename.
    assert np.isnan(a[:6, 6]).all() and np.isnan(diff[:6, 6]).all()
    bin_a = pa[qa][:, [6, 7, 8, 45, 46, 47]].sum(axis=1)
    bin_b = pb[qb][:, [6, 7, 44, 45]].sum(axis=1)
    np.testing.assert_allclose(a[6:, 6], bin_a[6:], atol=1e-6)
    np.testing.assert_allclose(diff[6:, 6], bin_a[6:] - bin_b[6:], atol=1e-6)
    np.testing.assert_allclose(np.nansum(a, axis=1), 1.0, atol=1e-5)
    # A window of rows across two blocks reads the same numbers as the whole.
    part = aligned_rows(run_b, al, "b", layer, head, slice(30, 50))
    np.testing.assert_allclose(part[:, 7], pb[qb[30:50], qb[6]], atol=1e-7)
