"""Agreement of an estimate with exact patch effects, against hand-computed numbers."""

import numpy as np
import pytest
from scipy import stats

from models.circuits.agreement import agreement, top_k_recall
from models.head import Head


def test_correlations_recall_and_worst_heads():
    exact = np.array([[0.9, -0.5, 0.0], [0.1, 0.3, -0.05]])
    estimate = np.array([[0.2, -0.45, 0.01], [0.12, 0.2, 0.0]])
    saturated = np.array([[True, False, False], [False, False, False]])
    found = agreement(estimate, exact, saturated, k=2, n_worst=2)
    assert found.pearson == pytest.approx(stats.pearsonr(estimate.ravel(), exact.ravel())[0])
    assert found.spearman == pytest.approx(stats.spearmanr(estimate.ravel(), exact.ravel())[0])
    # exact top 2 by size: 0.0 (0.9), 0.1 (-0.5); the estimate's: 0.1 (0.45), then 0.0 and 1.1
    # tie at 0.2 and the stable order keeps 0.0
    assert found.recall == 1.0 and found.n == 6
    assert [w.head for w in found.worst] == [Head(0, 0), Head(1, 1)]
    assert found.worst[0].saturated and not found.worst[1].saturated
    assert found.worst[0].gap == pytest.approx(-0.7)
    assert "top-2 recall 1.00 (6 heads)" in found.summary()


def test_missing_values_are_left_out():
    exact = np.array([[1.0, 2.0, np.nan, 4.0]])
    estimate = np.array([[1.0, 2.5, 3.0, 3.5]])
    found = agreement(estimate, exact, k=1)
    assert found.n == 3
    assert found.pearson == pytest.approx(stats.pearsonr([1.0, 2.5, 3.5], [1.0, 2.0, 4.0])[0])
    assert top_k_recall(estimate, exact, k=1) == 1.0  # both put head 0.3 first
    assert top_k_recall(np.array([[9.0, 0.0, 0.0, 1.0]]), exact, k=1) == 0.0
    assert top_k_recall(np.array([[9.0, 0.0, 0.0, 1.0]]), exact, k=2) == 0.5


def test_constant_estimate_has_no_correlation():
    found = agreement(np.zeros((2, 2)), np.arange(4.0).reshape(2, 2))
    assert np.isnan(found.pearson) and np.isnan(found.spearman)
    with pytest.raises(ValueError, match="shapes differ"):
        agreement(np.zeros((2, 2)), np.zeros((2, 3)))
