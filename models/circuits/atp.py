"""Attribution patching (AtP) and AtP*: every head's patch effect estimated from one clean pass,
one corrupted pass and one backward pass.

For an activation ``a`` (a head's ``z``, or its q, k or v) the estimate of patching its clean
value into the corrupted run is first order (Nanda 2023; Syed et al. 2023)::

    AtP(a) = (a_clean - a_corrupted) . dLD/da   (gradient on the corrupted run)

normalised like :func:`models.circuits.patching.head_effects`: divided by
``LD_clean - LD_corrupted``. Estimates come per head on ``hook_z`` (all positions), per head and
position, and per head input: q per query head, k and v per key/value head (on a GQA model a
key/value head is shared by ``n_heads // n_kv_heads`` query heads: :meth:`AtPResult.sharing`).
q and k are read before the rotation on RoPE models (``hook_q``/``hook_k``; the rotation is
linear, so the first-order estimate is the same either side of it); the QK fix uses the rotated
q and k the softmax sees.

AtP* (Kramar et al. 2024) adds the two fixes of :mod:`models.circuits.atp_fixes`: the QK fix for
q and k (the pattern recomputed exactly, then linearised) and GradDrop for every node (``L - 1``
partial backward passes; equation 11, signed by its largest term). A head's ``z`` has no softmax
of its own between it and its output, so the QK fix leaves ``z`` estimates as they are: there
``atp_star`` differs from ``atp`` only with GradDrop on.

Where no first-order estimate can be right: on SmolLM2's IOI prompt, heads 20.0 and 17.4 act
only through the queries of layers 23 (+0.33 alone) and 24 (-0.26 alone), and their patterns'
changes do not add up (together +0.36): even the exact downstream patterns, linearised after,
give -0.01. ``verify_top`` patches the heads AtP* ranks highest exactly
(:func:`models.circuits.resumed.check_top`, from the lowest of their blocks on), which is where
such misses sit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from models.circuits.atp_fixes import grad_drop_combine, patched_patterns, pattern_effect, softmax
from models.circuits.atp_runs import AtPRuns, attribution_runs
from models.circuits.gradients import GradientRun
from models.circuits.resumed import check_top
from models.circuits.task import Setup
from models.model.forward import (
    Hook,
    QKSource,
    k_hook,
    pattern_hook,
    q_hook,
    scores_hook,
    softmax_qk,
    v_hook,
    z_hook,
)
from models.model.handle import ModelHandle
from models.progress import Progress, part, quiet

NODES = ("z", "q", "k", "v")
SATURATED = 0.9


@dataclass(frozen=True)
class AtPResult:
    """Estimated patch effects (all float64, normalised by ``LD_clean - LD_corrupted``).

    Attributes:
        ld_clean, ld_corrupted: the two runs' logit differences.
        z, z_star: ``layer head_index`` AtP and AtP* of each head's output (all positions).
        z_positions, z_positions_star: ``layer head_index pos`` the same per position.
        q, q_star: ``layer head_index`` for each query head's q.
        k, k_star, v, v_star: ``layer kv_head`` for each key/value head's k and v.
        last_row_max: ``layer head_index`` largest attention weight of the last query, in
            either run (at least :data:`SATURATED`: a saturated head).
        qk_fix, grad_drop: which fixes ``*_star`` used.
        verified: ``layer head_index`` exact patch effects of the heads checked after the
            estimate (NaN elsewhere), or ``None``.
        seconds: wall time of the whole computation.
    """

    ld_clean: float
    ld_corrupted: float
    z: np.ndarray
    z_star: np.ndarray
    z_positions: np.ndarray
    z_positions_star: np.ndarray
    q: np.ndarray
    q_star: np.ndarray
    k: np.ndarray
    k_star: np.ndarray
    v: np.ndarray
    v_star: np.ndarray
    last_row_max: np.ndarray
    qk_fix: bool
    grad_drop: bool
    verified: np.ndarray | None
    seconds: float

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return int(self.q.shape[1] // self.k.shape[1])

    def sharing(self, kv_head: int) -> tuple[int, ...]:
        """The query heads that read key/value head ``kv_head``."""
        return tuple(range(kv_head * self.group, (kv_head + 1) * self.group))

    @property
    def saturated(self) -> np.ndarray:
        """``layer head_index`` whether the head's last query puts >= 0.9 on one key."""
        return self.last_row_max >= SATURATED

    @property
    def best(self) -> np.ndarray:
        """AtP* with the checked heads' exact effects in place of their estimates."""
        if self.verified is None:
            return self.z_star
        return np.where(np.isnan(self.verified), self.z_star, self.verified)


def _layer_estimates(
    layer: int,
    clean: dict[str, torch.Tensor],
    run: GradientRun,
    grads: dict[str, torch.Tensor],
    source: QKSource | None,
    scale: float,
) -> dict[str, torch.Tensor]:
    """This layer's unnormalised estimates with the gradients ``grads`` (float64)."""
    out = {}
    for node, name in zip(
        NODES, (z_hook(layer), q_hook(layer), k_hook(layer), v_hook(layer)), strict=True
    ):
        product = ((clean[name] - run.values[name]).double() * grads[name].double())[0]
        out[node] = product.sum(dim=(0, 2))  # pos head d_head -> head
        if node == "z":
            out["z_positions"] = product.sum(dim=2).T  # head pos
    if source is not None:
        q_new, k_new = (t[0] for t in softmax_qk(clean, layer, source))
        q_old, k_old = (t[0] for t in softmax_qk(run.values, layer, source))
        scores = run.values[scores_hook(layer)][0].double()
        old, grad = softmax(scores), grads[pattern_hook(layer)][0]
        group = q_old.shape[1] // k_old.shape[1]
        by_q = pattern_effect(
            patched_patterns(scores, q_old, q_new, k_old, k_old, scale), old, grad
        )
        by_k = pattern_effect(
            patched_patterns(scores, q_old, q_old, k_old, k_new, scale), old, grad
        )
        out["q_fix"], out["k_fix"] = by_q, by_k.view(-1, group).sum(dim=1)
    return out


def attribution_patching(
    model: ModelHandle,
    setup: Setup,
    *,
    qk_fix: bool = True,
    grad_drop: bool = False,
    verify_top: int = 0,
    hooks: Sequence[Hook] = (),
    runs: AtPRuns | None = None,
    progress: Progress = quiet,
) -> AtPResult:
    """AtP and AtP* of every head's z, q, k and v (see the module docstring).

    Args:
        model: a causal language model.
        setup: the prepared task.
        qk_fix: recompute patterns exactly for q and k estimates.
        grad_drop: GradDrop (``L - 1`` extra partial backward passes).
        verify_top: patch this many heads exactly, those with the largest ``|z_star|``
            (``ceil(k / batch)`` batched forward passes), into ``verified``.
        hooks: forward hooks applied to every pass (e.g. to freeze a norm).
        runs: the passes, when already made (:func:`attribution_runs`, same fixes).
        progress: progress callback; may raise ``Cancelled``.

    Raises:
        TaskError: clean and corrupted give the same LD.
        CircuitsUnavailable: a hook is missing, or the QK fix cannot read the softmax.
    """
    if verify_top > 0 and hooks:
        raise ValueError("checking heads exactly runs without extra hooks")
    start = time.perf_counter()
    share = 0.8 if grad_drop else 0.7
    if runs is None:
        runs = attribution_runs(
            model,
            setup,
            qk_fix=qk_fix,
            grad_drop=grad_drop,
            hooks=hooks,
            progress=part(progress, 0.0, share),
        )
    elif runs.qk_fix != qk_fix or runs.grad_drop != grad_drop:
        raise ValueError("the runs were made with other fixes")
    progress(share, "estimates")
    found = estimates(runs, model.facts.n_layers)
    verified = None
    if verify_top > 0:
        progress(0.9, f"patching the top {verify_top} heads exactly")
        verified = check_top(
            model,
            setup,
            runs.clean,
            runs.run.values,
            found["z"][1],
            verify_top,
            runs.ld_clean,
            runs.run.ld,
        )
    progress(1.0, "done")
    (z, z_star), (positions, positions_star) = found["z"], found["z_positions"]
    return AtPResult(
        ld_clean=runs.ld_clean,
        ld_corrupted=runs.run.ld,
        z=z,
        z_star=z_star,
        z_positions=positions,
        z_positions_star=positions_star,
        q=found["q"][0],
        q_star=found["q_fix" if qk_fix else "q"][1],
        k=found["k"][0],
        k_star=found["k_fix" if qk_fix else "k"][1],
        v=found["v"][0],
        v_star=found["v"][1],
        last_row_max=last_row_max(runs, model.facts.n_layers),
        qk_fix=qk_fix,
        grad_drop=grad_drop,
        verified=verified,
        seconds=time.perf_counter() - start,
    )


def estimates(runs: AtPRuns, n_layers: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per estimate kind (``z``, ``z_positions``, ``q``, ``k``, ``v`` and with the QK fix
    ``q_fix``, ``k_fix``): the normalised estimate with the full gradient, and the GradDrop
    combination of it (the same array without GradDrop)."""
    run, gap = runs.run, runs.gap

    def layers(grads: dict[str, torch.Tensor], upto: int) -> list[dict[str, torch.Tensor]]:
        return [
            _layer_estimates(layer, runs.clean, run, grads, runs.source, runs.scales[layer])
            for layer in range(upto)
        ]

    full = layers(run.grads, n_layers)
    dropped = {drop: layers(run.dropped[drop], drop) for drop in run.dropped}
    out = {}
    for key in full[0]:
        plain = np.stack([e[key].numpy() for e in full]) / gap
        if not runs.grad_drop:
            out[key] = (plain, plain)
            continue
        pad = [np.zeros_like(plain[0])]
        by_drop = {
            d: np.stack([e[key].numpy() for e in rows] + pad * (n_layers - d)) / gap
            for d, rows in dropped.items()
        }
        out[key] = (plain, grad_drop_combine(plain, by_drop))
    return out


def last_row_max(runs: AtPRuns, n_layers: int) -> np.ndarray:
    """``layer head_index`` largest weight of the last query's attention, in either run."""
    rows = [
        np.stack(
            [values[pattern_hook(layer)][0].max(dim=-1).values.numpy() for layer in range(n_layers)]
        )
        for values in (runs.clean, runs.run.values)
    ]
    largest: np.ndarray = np.maximum(*rows).astype(np.float64)
    return largest
