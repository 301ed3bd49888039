"""What the circuits page's two long jobs keep, and the work that makes it.

:func:`attribution_findings` makes the clean and corrupted passes once and reads every estimate
from them (AtP, AtP* with its options, the exact check of the top heads, and the edge
estimates when asked); :func:`weight_findings` reads what the weights alone say (per-head
scores, composition between heads). Both time themselves, so the page can say what each took.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from models.circuits.atp import AtPResult, attribution_patching
from models.circuits.atp_runs import attribution_runs
from models.circuits.composition import Composition, composition
from models.circuits.edges import EdgeEstimates, edge_estimates
from models.circuits.paths import MLPMode
from models.circuits.task import Setup
from models.circuits.weight_circuits import WeightScores, weight_scores
from models.model.handle import ModelHandle
from models.progress import Progress, part


@dataclass(frozen=True)
class AtPFindings:
    """Attribution patching of a task: the estimates, the edges (or None), wall times."""

    result: AtPResult
    edges: EdgeEstimates | None
    seconds: float
    edge_seconds: float


@dataclass(frozen=True)
class WeightFindings:
    """Per-head scores and composition between heads, with the time they took."""

    scores: WeightScores
    composition: Composition
    seconds: float


def attribution_findings(
    model: ModelHandle,
    setup: Setup,
    *,
    qk_fix: bool,
    grad_drop: bool,
    verify_top: int,
    edges: MLPMode | None,
    progress: Progress,
) -> AtPFindings:
    """The passes once, then every estimate read from them.

    Args:
        model: the loaded model.
        setup: the clean and corrupted prompts, answer and wrong tokens.
        qk_fix, grad_drop, verify_top: AtP*'s options (see
            :func:`models.circuits.atp.attribution_patching`).
        edges: how edge estimates treat MLPs (:func:`models.circuits.edges.edge_estimates`),
            or None for no edge estimates.
        progress: the progress callback; it may raise Cancelled.
    """
    start = time.perf_counter()
    share = 0.5 if edges else 0.9
    runs = attribution_runs(
        model, setup, qk_fix=qk_fix, grad_drop=grad_drop, progress=part(progress, 0.0, share * 0.8)
    )
    result = attribution_patching(
        model,
        setup,
        qk_fix=qk_fix,
        grad_drop=grad_drop,
        verify_top=verify_top,
        runs=runs,
        progress=part(progress, share * 0.8, share * 0.2),
    )
    found, edge_start = None, time.perf_counter()
    if edges:
        found = edge_estimates(
            model, runs, setup, mlps=edges, progress=part(progress, share, 1.0 - share)
        )
    now = time.perf_counter()
    return AtPFindings(result, found, now - start, now - edge_start if found else 0.0)


def weight_findings(model: ModelHandle, progress: Progress) -> WeightFindings:
    """Every head's weight scores, then composition between every pair of heads."""
    start = time.perf_counter()
    scores = weight_scores(model, progress=part(progress, 0.0, 0.6))
    pairs = composition(model, progress=part(progress, 0.6, 0.4))
    return WeightFindings(scores, pairs, time.perf_counter() - start)
