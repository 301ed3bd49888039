"""Head loadings on the Circuits page: one head's direct logit attribution, and one path
patching result, split exactly into a part per earlier head plus a remainder that closes the
sum (:mod:`models.circuits.loadings`)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from models.circuits import Loadings, PathResult, dla_loadings, path_loadings
from models.circuits.loadings import dla_loadings_cost, path_loadings_cost
from models.circuits.why import part_group, part_words
from models.errors import UserError
from models.head import Head
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Circuits
from ui.runtime.job_keys import DlaLoadingsKey, PathKey, PathLoadingsKey
from ui.sections.circuits_session import Ready
from ui.session_state import keep
from ui.widgets import job_view
from viz.circuits_figures import head_grid, parts_bars

TOP_CHOICES = 20


def receivers(ready: Ready) -> list[Head]:
    """Heads by the size of their direct effect, strongest first (the likely questions)."""
    dla = ready.base.attribution.heads
    order = np.argsort(-np.abs(dla), axis=None, kind="stable")[:TOP_CHOICES]
    n_heads = dla.shape[1]
    return [Head(int(i) // n_heads, int(i) % n_heads) for i in order]


def summary(found: Loadings, unit: str) -> str:
    carried = float(found.heads.sum())
    return (
        f"{found.edge.upper() if found.edge == 'dla' else found.edge} of {found.receiver}: "
        f"{found.total:+.4f} {unit}. Earlier heads carry {carried:+.4f}, the rest "
        f"{found.remainder:+.4f}; parts minus the whole: {found.gap:.1e}."
    )


def dla_section(model: ModelHandle, ready: Ready) -> None:
    """Which earlier heads feed one head's direct effect on LD (its values, read exactly)."""
    st.subheader("Head loadings: whose output a head's direct effect reads")
    choices = receivers(ready)
    head = st.selectbox(
        "Head",
        choices,
        format_func=lambda h: f"{h} (DLA {ready.base.attribution.heads[h.layer, h.index]:+.3f})",
        key=Circuits.LOADINGS_HEAD,
        help="Heads by the size of their direct logit attribution, strongest first.",
    )
    if head is None:
        return
    n = ready.setup.n_tokens
    cost = dla_loadings_cost(model, n, head).cost
    key = DlaLoadingsKey(ready.key, head)
    if st.session_state.get(Circuits.LOADINGS_ASKED) != key:
        st.caption(
            f"With the head's pattern and every norm's scale frozen at the clean run, its "
            f"output at the last position is a sum over the parts of the stream it reads, so "
            f"its DLA splits exactly into one part per earlier head plus the embeddings, MLPs "
            f"and biases. Two passes over the clean prompt: {cost.describe()}."
        )
        st.button(
            f"Split {head}'s DLA",
            key=Circuits.RUN_LOADINGS,
            on_click=keep,
            args=(Circuits.LOADINGS_ASKED, key),
        )
        return
    try:
        found = job_view.run_job(
            key,
            f"Splitting {head}'s direct logit attribution by earlier head",
            lambda p: dla_loadings(model, ready.setup, head, p),
            cost=cost,
        )
    except UserError as err:
        session.show_error(err)
        return
    if found is job_view.MISSING:
        return
    st.markdown(summary(found, "in LD"))
    left, right = st.columns([3, 2])
    title = f"Each earlier head's part of {head}'s DLA"
    left.plotly_chart(head_grid(found.heads, title=title, value_name="part"), width="stretch")
    if found.rest:
        right.plotly_chart(
            parts_bars(
                [(part_group(name), part_words(name), value) for name, value in found.rest],
                title="The rest",
            ),
            width="stretch",
        )


def path_section(model: ModelHandle, ready: Ready, key: PathKey, result: PathResult) -> None:
    """The senders' path effects against patching the receiver's whole input at once."""
    asked = PathLoadingsKey(key)
    cost = path_loadings_cost(model, ready.setup.n_tokens).cost
    if st.session_state.get(Circuits.LOADINGS_ASKED) != asked:
        st.button(
            f"Close the sum: patch {result.receiver}'s whole {result.input} once "
            f"({cost.describe()})",
            key=Circuits.RUN_PATH_LOADINGS,
            help="The senders' path effects are the per-head parts; patching the whole input "
            "from the clean run gives the total, and the remainder is what embeddings, MLPs "
            "and the senders' interactions carry.",
            on_click=keep,
            args=(Circuits.LOADINGS_ASKED, asked),
        )
        return
    try:
        found = job_view.run_job(
            asked,
            f"Patching {result.receiver}'s whole {result.input} once",
            lambda _p: path_loadings(model, ready.setup, result),
            cost=cost,
        )
    except UserError as err:
        session.show_error(err)
        return
    if found is not job_view.MISSING:
        st.markdown(summary(found, "of the gap"))
