"""The fast band reader against the store's own rebuild, and its fallback when they disagree."""

from dataclasses import dataclass

import numpy as np
import pytest

from models.capture.bands import layer_band, rebuilt_band
from models.capture.run import capture
from models.capture.store import FactoredPatterns

TEXT = "The ferry leaves the harbour at seven and comes back before dark, said Ms. O'Neil."


@pytest.mark.parametrize("name", ["bundled", "smollm2", "minilm"])
def test_bands_equal_the_store_windows(request, name):
    model = request.getfixturevalue(name)
    run = capture(model, TEXT, dense_limit=0)
    if not run.factored:
        pytest.skip(f"{name} is not held as q, k and LSE")
    n = run.n_tokens
    for rows, stop in ((slice(0, 5), 5), (slice(7, n), n), (slice(3, 11), n)):
        band = layer_band(run, 1, rows, slice(0, stop))
        expected = run.store.layer_window(1, rows, slice(0, stop))
        assert band.dtype == np.float32 and band.shape == expected.shape
        np.testing.assert_allclose(band, expected, atol=1e-5)  # float32 in another order
    if model.facts.causal:
        band = rebuilt_band(run.store, 0, slice(4, 9), n)
        assert np.all(band[:, 0, 5:] == 0.0) and np.all(band[:, 4, 9:] == 0.0)
        assert np.all(band[:, 4, :9] > 0.0)


@dataclass(frozen=True)
class HalvedPatterns(FactoredPatterns):
    """A store whose windows differ from what q, k and LSE give (as a new mask would)."""

    def layer_window(self, layer, rows, cols):
        return super().layer_window(layer, rows, cols) * 0.5


def test_a_band_that_disagrees_with_the_store_is_read_through_it(bundled):
    run = capture(bundled, TEXT, dense_limit=0)
    planted = HalvedPatterns(**{f: getattr(run.store, f) for f in run.store.__dataclass_fields__})
    odd = type(run)(**{**{f: getattr(run, f) for f in run.__dataclass_fields__}, "store": planted})
    rows = slice(2, 12)
    np.testing.assert_allclose(
        layer_band(odd, 0, rows, slice(0, 12)),
        planted.layer_window(0, rows, slice(0, 12)),
        atol=1e-7,
    )
    assert (
        np.abs(rebuilt_band(planted, 0, rows, 12) - layer_band(odd, 0, rows, slice(0, 12))).max()
        > 0.01
    )
