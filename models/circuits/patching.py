"""Activation patching on each head's output (``hook_z``), batched.

A patched run is the corrupted prompt with some heads' ``z`` (at every position, or at one)
taken from the clean run; its logit difference, relative to the clean and corrupted ones, is the
patch effect ``(LD_patched - LD_corrupted) / (LD_clean - LD_corrupted)``: 0 means the patch did
nothing, 1 that it restored the clean answer. ``hook_z`` holds one slot per query head, so GQA
models are patched per query head like any other.

Many patched runs share one forward pass: the corrupted ids are repeated ``B`` times and batch
row ``i`` gets its own patches, so a sweep over every head costs ``ceil(heads / B)`` passes.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from models.circuits.attribution import Attribution, attribute, attribution_hooks
from models.circuits.task import CircuitsUnavailable, Setup, TaskError, logit_diff
from models.model.forward import Hook, every_layer, missing_hooks, run_with_hooks, z_hook
from models.model.handle import ModelHandle
from models.model.weights import vocab_size
from models.progress import Progress, quiet

Patch = tuple[int, int, int | None]  # layer, head, position (None: every position)
BUDGET_BYTES = 512 * 2**20
MAX_BATCH = 32
MIN_GAP = 1e-6


@dataclass(frozen=True)
class Baseline:
    """The clean and corrupted runs: what every patched run is compared with.

    Attributes:
        ld_clean, ld_corrupted: logit differences of the two unpatched runs.
        clean_z: per layer, ``pos head_index d_head`` clean ``hook_z`` (CPU, model dtype).
        attribution: direct logit attribution of the clean run.
        batch: patched runs per forward pass (:func:`batch_size`).
        seconds_per_pass: measured time of one forward pass over ``batch`` copies of the
            corrupted prompt, i.e. of one batched patching pass.
    """

    ld_clean: float
    ld_corrupted: float
    clean_z: tuple[torch.Tensor, ...]
    attribution: Attribution
    batch: int
    seconds_per_pass: float

    def estimate_s(self, n_runs: int) -> float:
        """Expected seconds for ``n_runs`` patched runs, from the measured batched pass."""
        return math.ceil(n_runs / self.batch) * self.seconds_per_pass

    def effect(self, ld: np.ndarray) -> np.ndarray:
        """Patch effects of patched logit differences ``ld``.

        Raises:
            TaskError: clean and corrupted runs give the same logit difference.
        """
        gap = self.ld_clean - self.ld_corrupted
        if abs(gap) < MIN_GAP:
            raise TaskError(
                f"The clean and corrupted prompts give the same logit difference "
                f"({self.ld_clean:.4g}): there is nothing for a patch to restore. "
                "Choose a corruption that changes the answer."
            )
        return (np.asarray(ld, dtype=np.float64) - self.ld_corrupted) / gap


def capture_pass(
    model: ModelHandle, ids: torch.Tensor, names: Sequence[str]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One forward pass that returns the logits and keeps the named activations (on CPU).

    Raises:
        CircuitsUnavailable: the bridge does not expose one of the hooks.
    """
    missing = missing_hooks(model, names)
    if missing:
        raise CircuitsUnavailable(
            f"Not available for {model.facts.name}: TransformerLens "
            f"exposes no {missing[0]} hook for it."
        )
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str) -> Callable[..., None]:
        def hook(act: torch.Tensor, hook: object = None) -> None:
            seen[name] = act.detach().to("cpu")

        return hook

    logits = run_with_hooks(model, ids, [(name, keep(name)) for name in names])
    absent = [name for name in names if name not in seen]
    if absent:
        raise CircuitsUnavailable(
            f"Not available for {model.facts.name}: the {absent[0]} hook "
            "never fired in a forward pass."
        )
    return logits, seen


def baseline(
    model: ModelHandle, setup: Setup, batch: int | None = None, progress: Progress = quiet
) -> Baseline:
    """Run the clean prompt, keeping every ``hook_z`` and the attribution's activations, and
    ``batch`` copies of the corrupted prompt in one timed pass (what a patching pass costs)."""
    n_layers = model.facts.n_layers
    batch = batch or batch_size(model, setup.n_tokens)
    names = list(dict.fromkeys(attribution_hooks(model) + every_layer(z_hook, n_layers)))
    progress(0.0, "the clean prompt")
    logits, acts = capture_pass(model, setup.clean_ids, names)
    ld_clean = float(logit_diff(logits, setup.answer_id, setup.wrong_id)[0])
    del logits  # every position's logits: let them go before the corrupted pass needs room
    copies = "one copy" if batch == 1 else f"{batch} copies in one pass"
    progress(0.4, f"the corrupted prompt ({copies}, timed)")
    start = time.perf_counter()
    corrupted = run_with_hooks(model, setup.corrupted_ids.expand(batch, -1))
    seconds = time.perf_counter() - start
    ld_corrupted = float(logit_diff(corrupted, setup.answer_id, setup.wrong_id)[0])
    attribution = attribute(model, setup, {n: acts[n] for n in attribution_hooks(model)}, ld_clean)
    clean_z = tuple(acts[z_hook(layer)][0] for layer in range(n_layers))
    progress(1.0, "done")
    return Baseline(ld_clean, ld_corrupted, clean_z, attribution, batch, seconds)


def batch_size(
    model: ModelHandle, n_tokens: int, budget: int = BUDGET_BYTES, most: int = MAX_BATCH
) -> int:
    """How many patched copies one pass holds within ``budget`` bytes of activations
    (:func:`copy_bytes` each)."""
    return int(max(1, min(most, budget // copy_bytes(model, n_tokens))))


def copy_bytes(model: ModelHandle, n_tokens: int) -> int:
    """Bytes one copy of a prompt adds to a batched pass: its logits (``pos x d_vocab``, held
    twice: the pass's and the logit difference's), and per layer in flight a few
    ``pos x d_model`` streams, the MLP's hidden layer and the ``head x pos x pos`` scores and
    pattern, all in float32."""
    f = model.facts
    d_mlp = f.d_mlp or 4 * f.d_model
    widths = 2 * vocab_size(model) + 16 * f.d_model + 3 * d_mlp + 2 * f.n_heads * n_tokens
    return 4 * n_tokens * widths


def patch_hooks(rows: Sequence[Sequence[Patch]], clean_z: Sequence[torch.Tensor]) -> list[Hook]:
    """``hook_z`` hooks that give batch row ``i`` the patches ``rows[i]`` from ``clean_z``."""
    by_layer: dict[int, list[tuple[int, int, int | None]]] = defaultdict(list)
    for row, patches in enumerate(rows):
        for layer, head, pos in patches:
            by_layer[int(layer)].append((row, int(head), pos))

    def make(layer: int, items: list[tuple[int, int, int | None]]) -> Callable[..., torch.Tensor]:
        def hook(z: torch.Tensor, hook: object = None) -> torch.Tensor:
            src = clean_z[layer].to(z.device, z.dtype)
            out = z.clone()
            for row, head, pos in items:
                where = slice(None) if pos is None else pos
                out[row, where, head] = src[where, head]
            return out

        return hook

    return [(z_hook(layer), make(layer, items)) for layer, items in sorted(by_layer.items())]


def patched_logit_diffs(
    model: ModelHandle,
    setup: Setup,
    clean_z: Sequence[torch.Tensor],
    rows: Sequence[Sequence[Patch]],
    batch: int | None = None,
    progress: Progress = quiet,
    what: str = "patched runs",
) -> np.ndarray:
    """The corrupted prompt's logit difference under each row's patches, ``B`` rows a pass.

    Args:
        model: the loaded model.
        setup: the task.
        clean_z: per layer, the clean run's ``pos head_index d_head`` z.
        rows: one list of ``(layer, head, position or None)`` patches per patched run; an
            empty list is the plain corrupted run.
        batch: rows per forward pass (default: :func:`batch_size`).
        progress: called before every pass; may raise ``Cancelled``.
        what: how progress names the runs.

    Returns:
        ``len(rows)`` float64 logit differences.
    """
    batch = batch or batch_size(model, setup.n_tokens)
    n_passes = math.ceil(len(rows) / batch)
    out = np.zeros(len(rows))
    for i in range(n_passes):
        chunk = rows[i * batch : (i + 1) * batch]
        progress(i / n_passes, f"{what}: pass {i + 1} of {n_passes} ({len(chunk)} in a batch)")
        ids = setup.corrupted_ids.expand(len(chunk), -1)
        logits = run_with_hooks(model, ids, patch_hooks(chunk, clean_z))
        out[i * batch : i * batch + len(chunk)] = logit_diff(
            logits, setup.answer_id, setup.wrong_id
        ).numpy()
    progress(1.0, f"{what}: done")
    return out


def head_effects(
    model: ModelHandle,
    setup: Setup,
    base: Baseline,
    batch: int | None = None,
    progress: Progress = quiet,
) -> np.ndarray:
    """Patch effect of every head's z (all positions) from the clean run, one head at a time.

    Returns:
        ``layer head_index`` float64.
    """
    n_layers, n_heads = model.facts.n_layers, model.facts.n_heads
    rows = [[(layer, head, None)] for layer in range(n_layers) for head in range(n_heads)]
    ld = patched_logit_diffs(
        model,
        setup,
        base.clean_z,
        rows,
        batch or base.batch,
        progress,
        f"patching {len(rows)} heads",
    )
    return base.effect(ld).reshape(n_layers, n_heads)


def position_effects(
    model: ModelHandle,
    setup: Setup,
    base: Baseline,
    layer: int,
    head: int,
    batch: int | None = None,
    progress: Progress = quiet,
) -> np.ndarray:
    """Patch effect of head ``layer.head``'s z at each single position.

    Returns:
        ``pos`` float64.
    """
    rows = [[(layer, head, pos)] for pos in range(setup.n_tokens)]
    ld = patched_logit_diffs(
        model,
        setup,
        base.clean_z,
        rows,
        batch or base.batch,
        progress,
        f"patching {layer}.{head} at {len(rows)} positions",
    )
    return base.effect(ld)
