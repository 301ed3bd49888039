"""Cost estimates: the passes each computation makes, counted by hand, and memory and seconds
that grow with the work."""

import pytest

from models.circuits.cost import (
    atp_cost,
    edges_cost,
    exact_cost,
    forward_cost,
    path_cost,
    weights_cost,
)
from models.cost import Cost


def test_atp_passes(bundled):
    plain = atp_cost(bundled, 24, qk_fix=False)
    assert (plain.forward_passes, plain.backward_passes) == (2.0, 1.0)
    dropped = atp_cost(bundled, 24, grad_drop=True)
    assert dropped.backward_passes == 1.0 + (3 - 1) / 2  # L - 1 partial backward passes
    checked = atp_cost(bundled, 24, verify_top=10)
    assert checked.forward_passes == 12.0
    assert dropped.seconds > plain.seconds and dropped.peak_bytes > plain.peak_bytes
    assert atp_cost(bundled, 96).peak_bytes > atp_cost(bundled, 24).peak_bytes
    assert "2 forward + 1 backward passes" in plain.describe()
    assert forward_cost(bundled, 24).describe().startswith("1 forward pass, under 1 s")


@pytest.mark.parametrize(
    ("flops", "said"),
    [
        (0.0623e12, "under 1 s"),
        (2.4e12, "about 2 s"),
        (89e12, "about 89 s"),
        (600e12, "about 10 min"),
    ],
)
def test_a_cost_is_said_in_whole_seconds_as_the_buttons_say_it(flops, said):
    assert Cost(flops=flops, peak_bytes=3 * 2**20).describe(1e12) == f"{said}, at most 3 MB"


def test_patching_and_path_passes(bundled, smollm2):
    assert exact_cost(bundled, 24, 12).forward_passes == 14.0
    # receiver in layer 2 of 3: 8 senders, each run from block 2 on (a third of a pass)
    assert path_cost(bundled, 24, 2).forward_passes == pytest.approx(2 + 8 / 3)
    big = path_cost(smollm2, 15, 24)
    assert big.forward_passes == pytest.approx(2 + 24 * 9 * 6 / 30)
    assert big.seconds > path_cost(bundled, 24, 2).seconds


def test_edges_and_weights(bundled, smollm2):
    direct = edges_cost(bundled, 24, mlps="direct")
    recomputed = edges_cost(bundled, 24)
    assert direct.forward_passes == 0.0
    assert recomputed.forward_passes == pytest.approx(4 * (3 + 2 + 1) / 3)
    assert recomputed.seconds > direct.seconds
    small, large = weights_cost(bundled), weights_cost(smollm2)
    assert large.cost.flops > 1000 * small.cost.flops and large.peak_bytes > small.peak_bytes
    assert weights_cost(smollm2, composition=False).cost.flops < large.cost.flops
