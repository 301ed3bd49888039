"""What a piece of work will take, estimated before it runs: one value for every estimator.

Every costly computation has an estimator beside it that returns a :class:`Cost`: the
floating-point operations it does, the fixed seconds it spends beyond them (Python per step,
hooks per layer, file input and output), and the most memory it adds beside the loaded weights.
Time is ``flops / rate + overhead_s``. Before this machine has measured a kind of work the rate
is :data:`ASSUMED_FLOPS` for the device; the server's job pool then learns one rate per kind
of job from the jobs of that kind that finished (``ui.runtime.jobs.Throughput``), so estimates
follow the machine as it is and the kind of work it is. The server refuses work whose cost
exceeds the operator's limits before it starts, so an estimate of memory is an upper bound,
never a guess from below.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.model.spec import Device

# Sustained FLOP/s assumed before anything is measured: two busy CPU cores, one GPU.
ASSUMED_FLOPS: dict[Device, float] = {"cpu": 4e10, "cuda": 2e12}


def with_slack(counted: float) -> int:
    """``counted`` bytes and a quarter again: for what the C allocator's grain and the matrix
    library's buffers add to the arrays an estimate counts one by one, where that count comes
    close to the measured peak (a batch sized to fill a budget, a pass whose arrays are all
    counted)."""
    return int(5 * counted // 4)


def device_of(device: str) -> Device:
    """The estimators' device for a model's device string (``cuda:1`` is a GPU too)."""
    return "cuda" if str(device).startswith("cuda") else "cpu"


@dataclass(frozen=True)
class Cost:
    """What a piece of work will take.

    Attributes:
        flops: floating-point operations.
        peak_bytes: the most memory it adds beside the loaded weights (an upper bound).
        overhead_s: seconds beyond the arithmetic (per step, per layer, disk).
        device: where it runs.
    """

    flops: float = 0.0
    peak_bytes: int = 0
    overhead_s: float = 0.0
    device: Device = "cpu"

    def seconds(self, flops_per_s: float | None = None) -> float:
        """Seconds at ``flops_per_s`` (the device's assumed rate when None)."""
        rate = flops_per_s if flops_per_s else ASSUMED_FLOPS[self.device]
        return self.flops / rate + self.overhead_s

    def then(self, other: Cost) -> Cost:
        """This work followed by ``other`` (on this one's device): times add, memory is the
        larger peak."""
        return Cost(
            flops=self.flops + other.flops,
            peak_bytes=max(self.peak_bytes, other.peak_bytes),
            overhead_s=self.overhead_s + other.overhead_s,
            device=self.device,
        )

    def times(self, n: float) -> Cost:
        """``n`` runs of this work one after another (memory is one run's)."""
        return Cost(self.flops * n, self.peak_bytes, self.overhead_s * n, self.device)

    def describe(self, flops_per_s: float | None = None) -> str:
        """``about 2 s, at most 40 MB`` in words (whole seconds, as the start buttons say them:
        ``under 1 s`` below one)."""
        seconds = self.seconds(flops_per_s)
        when = (
            "under 1 s"
            if seconds < 1
            else f"about {seconds:.0f} s"
            if seconds < 90
            else f"about {seconds / 60:.0f} min"
        )
        return f"{when}, at most {self.peak_bytes / 2**20:,.0f} MB"
