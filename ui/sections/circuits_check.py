"""Circuits page: attribution patching checked against exact activation patching, on screen (a
scatter with Pearson, Spearman, top-k recall and the heads where they disagree most, saturated
ones flagged). Exact patching is optional and its cost stated; the estimate stands alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from models.circuits import AtPResult, agreement
from models.circuits.agreement import Agreement
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Circuits
from ui.sections.circuits import exact_cost_text, exact_effects, exact_toggle
from ui.sections.circuits_session import Ready
from ui.state.circuits import CircuitsState
from viz.circuits_figures import atp_scatter


def worst_table(ready: Ready, found: Agreement) -> pd.DataFrame:
    rows = [
        {
            "L.H": str(w.head),
            "AtP*": w.estimate,
            "exact": w.exact,
            "gap": w.gap,
            "saturated": w.saturated,
            "open": session.explorer_link(w.head, prompt=ready.task.clean),
        }
        for w in found.worst
    ]
    return pd.DataFrame(rows)


def numbers(found: Agreement, plain: Agreement, checked: Agreement | None) -> None:
    c = st.columns(3)
    c[0].metric("Pearson", f"{found.pearson:.3f}", help="AtP* against exact, over the heads")
    c[1].metric("Spearman", f"{found.spearman:.3f}", help="Rank correlation")
    c[2].metric(
        f"Top-{found.k} recall",
        f"{found.recall:.2f}",
        help=f"Share of the {found.k} heads with the largest exact |effect| that AtP* "
        f"also puts in its top {found.k}",
    )
    st.caption(
        f"AtP without the fixes: {plain.summary()}. Published for GPT-2 small IOI "
        "attention outputs: Pearson 0.979 (RelP, 2025)."
    )
    if checked is not None:
        st.caption(f"With the top heads checked exactly: {checked.summary()}.")


def check(
    model: ModelHandle, ready: Ready, state: CircuitsState, result: AtPResult
) -> np.ndarray | None:
    """The scatter against exact patching when it is switched on; the exact effects or None."""
    st.subheader("Checked against exact patching")
    st.caption(
        f"Exact activation patching of every head (the patching tab's job, shared): "
        f"{exact_cost_text(model, ready.base)}."
    )
    if not exact_toggle(model, state, "Patch every head exactly too", Circuits.EXACT_CHECK):
        st.info(
            "The estimate stands alone: switch exact patching on to see how far to trust "
            "it, or check only the top heads exactly (above)."
        )
        return None
    effects = exact_effects(model, ready)
    if effects is None:
        return None
    found = agreement(result.z_star, effects, result.saturated)
    plain = agreement(result.z, effects, result.saturated)
    checked = (
        agreement(result.best, effects, result.saturated) if result.verified is not None else None
    )
    left, right = st.columns([3, 2])
    left.plotly_chart(
        atp_scatter(
            result.z_star, effects, found, title="AtP* against exact patching, one point per head"
        ),
        width="stretch",
    )
    with right:
        numbers(found, plain, checked)
        n_sat = int(result.saturated.sum())
        st.markdown(
            f"**Where they disagree most** ({n_sat} head{'s' if n_sat != 1 else ''} "
            "saturated: a softmax near 0/1 has a near-zero gradient however far a "
            "patch moves it, the published failure of attribution patching)"
        )
        st.dataframe(
            worst_table(ready, found),
            hide_index=True,
            width="stretch",
            column_config={
                "open": st.column_config.LinkColumn("explorer", display_text="open ↗"),
                **{
                    name: st.column_config.NumberColumn(name, format="%.4f")
                    for name in ("AtP*", "exact", "gap")
                },
            },
        )
    return effects
