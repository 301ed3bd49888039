"""Mean, standard error, range and the lower bound that flags use."""

import numpy as np
import pytest

from models.heads.finding.spread import Z, spread


def test_spread_matches_hand_computed_values():
    per_text = np.array([[[0.2, np.nan]], [[0.4, 0.5]], [[0.9, np.nan]]])  # 3 texts, 1 x 2 heads
    s = spread(per_text)
    assert s.n.tolist() == [[3, 1]]
    assert s.mean[0, 0] == pytest.approx(0.5)
    sd = np.sqrt(((0.2 - 0.5) ** 2 + (0.4 - 0.5) ** 2 + (0.9 - 0.5) ** 2) / 2)
    assert s.se[0, 0] == pytest.approx(sd / np.sqrt(3))
    assert s.lower_bound[0, 0] == pytest.approx(0.5 - Z * sd / np.sqrt(3))
    assert (s.low[0, 0], s.high[0, 0]) == (0.2, 0.9)
    # one text scored: no standard error, the bound is the mean
    assert np.isnan(s.se[0, 1]) and s.lower_bound[0, 1] == 0.5 and s.mean[0, 1] == 0.5


def test_one_text_has_no_spread_and_all_nan_stays_nan():
    s = spread(np.array([[[0.7, np.nan]]]))
    assert np.isnan(s.se).all() and s.lower_bound[0, 0] == 0.7
    assert np.isnan(s.mean[0, 1]) and np.isnan(s.lower_bound[0, 1]) and s.n[0, 1] == 0
