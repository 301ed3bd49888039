"""What ``python -m models.circuits atp | paths | weights`` compute, and their CSV tables.

Every table holds numbers and ``L.H`` head labels only (no prompt text), so no cell can start a
spreadsheet formula. Floats are written with 6 significant digits; an empty cell is a value that
was not computed.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from models.circuits.atp import AtPResult, attribution_patching
from models.circuits.composition import Composition, composition
from models.circuits.cost import atp_cost, exact_cost, path_cost, weights_cost
from models.circuits.patching import baseline, head_effects
from models.circuits.paths import PathResult, path_patching
from models.circuits.table import FLOAT_FORMAT
from models.circuits.task import CircuitTask, Setup, TaskError, prepare
from models.circuits.weight_circuits import WeightScores, weight_scores
from models.cli import Say
from models.head import Head, all_heads
from models.model.handle import ModelHandle
from models.model.loading import load
from models.model.spec import ModelSpec

ATP_COLUMNS = [
    "L.H",
    "layer",
    "head",
    "atp",
    "atp_star",
    "q_atp",
    "q_atp_star",
    "kv_head",
    "k_atp",
    "k_atp_star",
    "v_atp",
    "v_atp_star",
    "last_row_max",
]
PATH_COLUMNS = ["L.H", "layer", "head", "path_effect"]
WEIGHT_COLUMNS = [
    "L.H",
    "layer",
    "head",
    "copying",
    "qk_prev",
    "qk_self",
    "qk_first",
    "qk_locality",
]
PAIR_COLUMNS = ["sender", "receiver", "q_composition", "k_composition", "v_composition"]


def to_csv(table: pd.DataFrame) -> str:
    """CSV text of a table."""
    text: str = table.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    return text


def _heads(n_layers: int, n_heads: int) -> dict[str, list[str] | list[int]]:
    heads = list(all_heads(n_layers, n_heads))
    return {
        "L.H": [str(h) for h in heads],
        "layer": [h.layer for h in heads],
        "head": [h.index for h in heads],
    }


def atp_table(result: AtPResult, exact: np.ndarray | None = None) -> pd.DataFrame:
    """One row per head: ``ATP_COLUMNS``, with ``patch_effect`` after ``atp_star`` when
    ``exact`` is given and ``checked`` (exact effects of the heads checked, else empty) when
    the result has them. k and v columns are the head's key/value head's (``kv_head``), the same
    for every query head that shares it."""
    n_layers, n_heads = result.z.shape
    group = result.group
    kv = np.array([h.index // group for h in all_heads(n_layers, n_heads)])
    layer = np.repeat(np.arange(n_layers), n_heads)
    columns = {
        **_heads(n_layers, n_heads),
        "atp": result.z.ravel(),
        "atp_star": result.z_star.ravel(),
    }
    if exact is not None:
        columns["patch_effect"] = np.asarray(exact, dtype=np.float64).ravel()
    if result.verified is not None:
        columns["checked"] = result.verified.ravel()
    columns.update(
        {
            "q_atp": result.q.ravel(),
            "q_atp_star": result.q_star.ravel(),
            "kv_head": kv,
            "k_atp": result.k[layer, kv],
            "k_atp_star": result.k_star[layer, kv],
            "v_atp": result.v[layer, kv],
            "v_atp_star": result.v_star[layer, kv],
            "last_row_max": result.last_row_max.ravel(),
        }
    )
    return pd.DataFrame(columns)


def path_table(result: PathResult) -> pd.DataFrame:
    """One row per sender head: ``L.H, layer, head, path_effect`` (0 where it cannot reach)."""
    n_layers, n_heads = result.effects.shape
    table = pd.DataFrame({**_heads(n_layers, n_heads), "path_effect": result.effects.ravel()})
    return table[PATH_COLUMNS]


def weight_table(scores: WeightScores) -> pd.DataFrame:
    """One row per head: ``WEIGHT_COLUMNS``."""
    n_layers, n_heads = scores.copying.shape
    return pd.DataFrame(
        {
            **_heads(n_layers, n_heads),
            "copying": scores.copying.ravel(),
            "qk_prev": scores.qk_prev.ravel(),
            "qk_self": scores.qk_self.ravel(),
            "qk_first": scores.qk_first.ravel(),
            "qk_locality": scores.qk_locality.ravel(),
        }
    )[WEIGHT_COLUMNS]


def pair_table(scores: Composition) -> pd.DataFrame:
    """One row per (sender, receiver) in different layers: ``PAIR_COLUMNS``."""
    rows = scores.pairs()
    if not rows:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    senders, receivers, q, k, v = zip(*rows, strict=True)
    return pd.DataFrame(
        {
            "sender": [str(h) for h in senders],
            "receiver": [str(h) for h in receivers],
            "q_composition": q,
            "k_composition": k,
            "v_composition": v,
        }
    )


def _task(args: argparse.Namespace, say: Say) -> tuple[ModelHandle, Setup]:
    model = load(
        ModelSpec(name=args.model, device=args.device, dtype=args.dtype),
        progress=lambda _f, text: say(text),
    )
    setup = prepare(model, CircuitTask(args.clean, args.corrupted, args.answer, args.wrong))
    for note in setup.notes:
        say(note)
    say(f"{setup.n_tokens} tokens; answer {setup.answer_label!r}, wrong {setup.wrong_label!r}")
    return model, setup


def run_atp(args: argparse.Namespace, say: Say) -> tuple[AtPResult, pd.DataFrame]:
    """Load, estimate (and with ``--exact`` patch every head) and return the table."""
    model, setup = _task(args, say)
    qk_fix, grad_drop = not args.no_qk_fix, not args.no_grad_drop
    cost = atp_cost(
        model, setup.n_tokens, qk_fix=qk_fix, grad_drop=grad_drop, verify_top=args.check_top
    )
    say(
        f"AtP* ({'QK fix' if qk_fix else 'no QK fix'}, "
        f"{'GradDrop' if grad_drop else 'no GradDrop'}): {cost.describe()}"
    )
    result = attribution_patching(
        model,
        setup,
        qk_fix=qk_fix,
        grad_drop=grad_drop,
        verify_top=args.check_top,
        progress=lambda f, text: say(f"{100 * f:3.0f}% {text}"),
    )
    exact = None
    if args.exact:
        total = model.facts.n_total_heads
        cost = exact_cost(model, setup.n_tokens, total)
        say(f"exact patching of {total} heads: {cost.describe()}")
        base = baseline(model, setup)
        exact = head_effects(
            model, setup, base, progress=lambda f, text: say(f"{100 * f:3.0f}% {text}")
        )
    return result, atp_table(result, exact)


def run_paths(args: argparse.Namespace, say: Say) -> tuple[PathResult, pd.DataFrame]:
    """Load, path-patch every earlier head into the receiver's input and return the table."""
    model, setup = _task(args, say)
    receiver = Head.parse(args.receiver)
    if not receiver.fits(model.facts.n_layers, model.facts.n_heads):
        raise TaskError(
            f"{receiver} is not a head of {model.facts.name} ({model.facts.n_layers} "
            f"layers x {model.facts.n_heads} heads)."
        )
    say(
        f"path patching into {receiver} ({args.input}): "
        f"{path_cost(model, setup.n_tokens, receiver.layer).describe()}"
    )
    result = path_patching(
        model, setup, receiver, args.input, progress=lambda f, text: say(f"{100 * f:3.0f}% {text}")
    )
    if args.input != "q" and len(result.shared_by) > 1:
        shared = ", ".join(str(Head(receiver.layer, h)) for h in result.shared_by)
        say(f"{args.input} of {receiver} is key/value head {result.index}, shared by {shared}")
    return result, path_table(result)


def run_weights(
    args: argparse.Namespace, say: Say
) -> tuple[WeightScores, pd.DataFrame, pd.DataFrame | None]:
    """Load and read every head's weight scores (and the composition scores with ``--pairs``)."""
    model = load(
        ModelSpec(name=args.model, device=args.device, dtype=args.dtype),
        progress=lambda _f, text: say(text),
    )
    say(f"weight circuits: {weights_cost(model, composition=args.pairs is not None).describe()}")
    scores = weight_scores(model)
    for note in scores.notes:
        say(note)
    pairs = pair_table(composition(model)) if args.pairs is not None else None
    return scores, weight_table(scores), pairs
