"""Circuits page: attribution patching (AtP, AtP*) of every head's z, q, k and v as one job, its
heatmaps, one head position by position, and the table (the check against exact patching is
:mod:`ui.sections.circuits_check`; layout only, the maths is in models.circuits).

The job makes the clean and corrupted passes once (:func:`attribution_runs`) and reads
everything from them: AtP and AtP*, the heads checked exactly and, when asked, the estimate of
every head-to-head edge. Only those small results are kept; the passes are dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from models.circuits import (
    AtPResult,
)
from models.circuits.cost import PassPlan, atp_cost, edges_cost
from models.circuits.findings import AtPFindings, attribution_findings
from models.errors import UserError
from models.head import Head
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Circuits
from ui.sections.circuits_session import Ready, apply, atp_key, bound
from ui.state import circuits as cs
from ui.state import circuits_derived as derived
from ui.state.circuits import AtPOptions, CircuitsState
from ui.widgets import job_view
from viz.circuits_figures import head_grid, position_bars

NODE_LABELS = {
    "z": "z (the head's output)",
    "q": "q (its queries)",
    "k": "k (keys)",
    "v": "v (values)",
}
MAX_VERIFY = 20


def total_cost(model: ModelHandle, n_tokens: int, options: AtPOptions) -> PassPlan:
    """The job's whole cost: AtP with its options, plus the edge estimates when on."""
    cost = atp_cost(
        model,
        n_tokens,
        qk_fix=options.qk_fix,
        grad_drop=options.grad_drop,
        verify_top=options.verify_top,
    )
    if not options.edges:
        return cost
    return cost.then(edges_cost(model, n_tokens, options.qk_fix, options.edges))


def options_form(model: ModelHandle, ready: Ready, state: CircuitsState) -> None:
    """The QK fix, GradDrop and the exact check of the top heads, each with its extra cost."""
    n = ready.setup.n_tokens
    plain = atp_cost(model, n, qk_fix=False)
    with_qk = atp_cost(model, n, qk_fix=True)
    base = atp_cost(model, n, qk_fix=state.atp.qk_fix)
    c = st.columns(3)
    c[0].toggle(
        "QK fix",
        help="For q and k, recompute the attention pattern exactly with the "
        "patched q or k and linearise only after it (AtP*): a saturated softmax has a "
        "near-zero gradient however far a patch moves it. Costs "
        f"{derived.extra_cost(with_qk, plain)}.",
        **bound(Circuits.QK_FIX, state.atp.qk_fix, cs.set_qk_fix),
    )
    c[0].caption(f"QK fix: {derived.extra_cost(with_qk, plain)}")
    dropped = atp_cost(model, n, qk_fix=state.atp.qk_fix, grad_drop=True)
    c[1].toggle(
        "GradDrop",
        help="Repeat the backward pass once per layer with that layer's "
        "gradient path dropped, and combine (AtP*): exposes effects that cancel along "
        "different paths.",
        **bound(Circuits.GRAD_DROP, state.atp.grad_drop, cs.set_grad_drop),
    )
    c[1].caption(f"GradDrop: {derived.extra_cost(dropped, base)}")
    c[2].number_input(
        "Check the top heads exactly",
        0,
        MAX_VERIFY,
        help="Patch the heads AtP* ranks highest exactly after the estimate: "
        "where first-order estimates miss, they miss on the heads that "
        "matter.",
        **bound(Circuits.VERIFY_TOP, state.atp.verify_top, cs.set_verify_top),
    )
    top = max(state.atp.verify_top, 1)
    checked = atp_cost(model, n, qk_fix=state.atp.qk_fix, verify_top=top)
    c[2].caption(f"Checking the top {top}: {derived.extra_cost(checked, base)}")


def run(model: ModelHandle, ready: Ready, state: CircuitsState) -> AtPFindings | None:
    """The attribution job for the state's options (started when cheap or asked), or None."""
    edges_s = edges_cost(model, ready.setup.n_tokens, state.atp.qk_fix, state.edges_mode).seconds
    options = cs.atp_options(state, edges_s)
    cost = total_cost(model, ready.setup.n_tokens, options)
    st.caption(
        f"This run: {cost.describe()}"
        + (f", with the edge estimates (MLPs {options.edges})" if options.edges else "")
        + ". Estimates are normalised like patch effects: divided by LD_clean − "
        "LD_corrupted."
    )
    key, label = atp_key(ready, options), "Attribution patching of every head"
    scale = job_view.Scale(
        lambda n: total_cost(model, n, options).cost,
        ready.setup.n_tokens,
        "tokens in each prompt with these options",
    )
    if not cs.should_run(state, "atp", cost.seconds):
        refused = job_view.refusal(key, label, cost.cost, scale)
        if refused is not None:
            session.show_error(refused)
            return None
        st.button(
            f"Estimate every head (about {cost.seconds:.2g} s)",
            key=Circuits.RUN_ATP,
            type="primary",
            on_click=apply,
            args=(cs.ask, "atp"),
        )
        return None
    try:
        found = job_view.run_job(
            key,
            label,
            lambda p: attribution_findings(
                model,
                ready.setup,
                qk_fix=options.qk_fix,
                grad_drop=options.grad_drop,
                verify_top=options.verify_top,
                edges=options.edges,
                progress=p,
            ),
            cost=cost.cost,
            scale=scale,
        )
    except UserError as err:
        session.show_error(err)
        return None
    return None if found is job_view.MISSING else found


def kv_columns(result: AtPResult) -> list[str]:
    """Column labels of key/value heads: ``kv 0 (q 0–2)`` (the query heads that share it)."""
    out = []
    for kv in range(result.k.shape[1]):
        shared = result.sharing(kv)
        heads = f"{shared[0]}–{shared[-1]}" if len(shared) > 1 else str(shared[0])
        out.append(f"kv {kv} (q {heads})")
    return out


def heatmaps(result: AtPResult, state: CircuitsState) -> None:
    """AtP and AtP* side by side for one node kind (z, q, k or v)."""
    node = st.radio(
        "Estimate of patching each head's",
        cs.NODES,
        horizontal=True,
        format_func=NODE_LABELS.__getitem__,
        **bound(Circuits.NODE, state.node, cs.choose_node),
    )
    plain, star = getattr(result, node), getattr(result, f"{node}_star")
    shared = node in ("k", "v")
    columns = kv_columns(result) if shared else None
    title = "key/value head" if shared else "head"
    left, right = st.columns(2)
    for where, values, name in ((left, plain, "AtP"), (right, star, "AtP*")):
        where.plotly_chart(
            head_grid(
                values,
                title=f"{name} of {node}",
                value_name=name,
                floor=1.0,
                columns=columns,
                column_title=title,
            ),
            width="stretch",
        )
    if shared and result.group > 1:
        groups = "; ".join(
            f"kv {kv}: heads {', '.join(map(str, result.sharing(kv)))}"
            for kv in range(result.k.shape[1])
        )
        st.caption(
            f"Each key/value head is shared by {result.group} query heads ({groups}): "
            f"its {node} estimate is the effect of patching it for all of them at once."
        )
    if node == "z" and not result.grad_drop:
        st.caption(
            "For z the QK fix changes nothing (no softmax between z and the head's "
            "output): AtP* differs from AtP there only with GradDrop on."
        )


def positions(ready: Ready, result: AtPResult, state: CircuitsState) -> None:
    """One head's AtP* at each position (of its output z)."""
    n_layers, n_heads = result.z.shape
    heads = [Head(layer, h) for layer in range(n_layers) for h in range(n_heads)]
    head = state.atp_head
    if head not in heads:
        head = heads[int(np.nanargmax(np.abs(result.z_star)))]
    head = st.selectbox(
        "Head, position by position (strongest |AtP*| first by default)",
        heads,
        format_func=str,
        **bound(Circuits.ATP_HEAD, head, cs.choose_atp_head),
    )
    setup = ready.setup
    differs = [a != b for a, b in zip(setup.tokens, setup.corrupted_tokens, strict=True)]
    st.plotly_chart(
        position_bars(
            result.z_positions_star[head],
            setup.tokens,
            differs=differs,
            title=f"AtP* of {head}'s output at each position",
        ),
        width="stretch",
    )
    st.caption(
        f"AtP* of {head} over all positions: {result.z_star[head]:+.4f} (the "
        f"positions add up to it without GradDrop). [Open {head} in the explorer on "
        f"the clean prompt ↗]({session.explorer_link(head, prompt=ready.task.clean)})"
    )


def atp_table(result: AtPResult, exact: np.ndarray | None = None) -> pd.DataFrame:
    """One row per head: AtP and AtP* of z, q and of the k and v of its key/value head, whether
    its attention is saturated, its exact check and (when given) its exact patch effect."""
    n_layers, n_heads = result.z.shape
    layers, heads = np.divmod(np.arange(n_layers * n_heads), n_heads)
    kv = heads // result.group
    checked = np.full(layers.size, np.nan) if result.verified is None else result.verified.ravel()
    return pd.DataFrame(
        {
            "L.H": [str(Head(int(a), int(b))) for a, b in zip(layers, heads, strict=True)],
            "layer": layers,
            "head": heads,
            "atp": result.z.ravel(),
            "atp_star": result.z_star.ravel(),
            "q": result.q.ravel(),
            "q_star": result.q_star.ravel(),
            "kv_head": kv,
            "k_star": result.k_star[layers, kv],
            "v_star": result.v_star[layers, kv],
            "saturated": result.saturated.ravel(),
            "checked": checked,
            "patch_effect": (
                np.full(layers.size, np.nan)
                if exact is None
                else np.asarray(exact, dtype=np.float64).ravel()
            ),
        }
    )


def table(ready: Ready, result: AtPResult, exact: Any) -> None:
    frame = atp_table(result, exact)
    frame["open"] = [
        session.explorer_link(Head(int(a), int(b)), prompt=ready.task.clean)
        for a, b in zip(frame["layer"], frame["head"], strict=True)
    ]
    frame = frame.sort_values("atp_star", key=np.abs, ascending=False, kind="stable")
    number = {
        name: st.column_config.NumberColumn(label, format="%.4f")
        for name, label in (
            ("atp", "AtP (z)"),
            ("atp_star", "AtP* (z)"),
            ("q", "AtP (q)"),
            ("q_star", "AtP* (q)"),
            ("k_star", "AtP* (k)"),
            ("v_star", "AtP* (v)"),
            ("checked", "exact (checked)"),
            ("patch_effect", "exact patch effect"),
        )
    }
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_order=[  # a column not computed yet is left out, not shown as "None"
            name
            for name in (
                "L.H",
                "open",
                "atp",
                "atp_star",
                "q",
                "q_star",
                "kv_head",
                "k_star",
                "v_star",
                "saturated",
                "checked",
                "patch_effect",
            )
            if name not in ("checked", "patch_effect") or frame[name].notna().any()
        ],
        column_config={
            **number,
            "open": st.column_config.LinkColumn(
                "explorer",
                display_text="open ↗",
                help="The explorer on this head with the clean prompt",
            ),
            "kv_head": st.column_config.NumberColumn(
                "kv head", help="The key/value head it reads (k and v are its)"
            ),
            "saturated": st.column_config.CheckboxColumn(
                "saturated", help="Its last query puts ≥ 0.9 on one key"
            ),
        },
    )


def tab(model: ModelHandle, ready: Ready, state: CircuitsState) -> None:
    """The AtP tab: options with their costs, the job, heatmaps, positions, the check, table."""
    from ui.sections import circuits_check

    st.subheader("Attribution patching: every head from two passes and a backward pass")
    st.caption(
        "AtP estimates each head's patch effect to first order, (a_clean − a_corrupted) "
        "· ∂LD/∂a on the corrupted run, for its output z, its queries, keys and values "
        "at once (Nanda 2023; Syed et al. 2023). AtP* (Kramár et al. 2024) adds the QK "
        "fix and GradDrop against its false negatives."
    )
    options_form(model, ready, state)
    found = run(model, ready, state)
    if found is None:
        return
    result = found.result
    st.caption(
        f"Computed in {found.seconds:.2f} s"
        + (f" ({found.edge_seconds:.2f} s of it for the edges)" if found.edges else "")
        + f". AtP* here: QK fix {'on' if result.qk_fix else 'off'}, GradDrop "
        f"{'on' if result.grad_drop else 'off'}."
    )
    heatmaps(result, state)
    positions(ready, result, state)
    exact = circuits_check.check(model, ready, state, result)
    st.subheader("Every head")
    table(ready, result, exact)
