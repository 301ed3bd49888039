"""Kernel check sections: what ran, the error grids, one head compared, the timings (layout
only; the check is in models.attention.check)."""

from __future__ import annotations

from typing import get_args

import pandas as pd
import streamlit as st
import torch

from models.attention.check import (
    BACKEND_WORDS,
    TOLERANCES,
    KernelDType,
    KernelReport,
    check_kernel,
)
from models.cost import Cost, with_slack
from models.head import Head
from models.model.facts import ModelFacts
from models.model.handle import ModelHandle
from models.model.weights import vocab_size
from ui import session
from ui.keys import Kernel
from ui.runtime.job_keys import KernelKey
from ui.session_state import keep, seed_widgets
from ui.state import kernel as state
from ui.state.kernel import KernelView
from ui.text import md
from ui.widgets import components, job_view
from viz.kernel_figures import error_grid, pattern_comparison

MAX_TOKENS = 256
P_ERR, O_ERR = "max |P_kernel - P_model|", "max |O_kernel - z_model|"


def current_view() -> KernelView:
    """The page's view: from the link the first time, then as the visitor changes it."""
    return session.page_view(Kernel.VIEW, "kernel", KernelView)


def save(view: KernelView) -> KernelView:
    keep(Kernel.VIEW, view)
    return view


def pick_from_table(heads: list[Head]) -> None:
    rows = st.session_state[Kernel.TABLE].selection.rows
    if rows:
        save(state.choose_head(current_view(), heads[rows[0]]))


def _dtype_changed() -> None:
    save(state.with_dtype(current_view(), st.session_state[Kernel.DTYPE]))


def _head_changed() -> None:
    save(state.choose_head(current_view(), st.session_state[Kernel.HEAD]))


def header(facts: ModelFacts) -> str:
    return (
        f"**{md(facts.name)}** · {facts.n_layers} layers × {facts.n_heads} heads "
        f"({facts.attention_kind}, {facts.n_kv_heads} key/value heads) · d_head "
        f"{facts.d_head} · {'causal' if facts.causal else 'bidirectional: no mask'} · "
        f"positions: {facts.positional}"
    )


def dtype_choice(view: KernelView) -> KernelView:
    """The kernel's dtype (half precision only where a CUDA GPU runs it); returns the view."""
    gpu = torch.cuda.is_available()
    options: list[KernelDType] = list(get_args(KernelDType)) if gpu else ["float32"]
    view, notes = state.fit_dtype(view, options)
    for note in notes:
        st.caption(md(note))
    save(view)
    seed_widgets({Kernel.DTYPE: view.dtype})
    dtype: KernelDType = st.selectbox(
        "Kernel dtype",
        options,
        key=Kernel.DTYPE,
        on_change=_dtype_changed,
        help="q, k and v are cast to this dtype before the kernel runs.",
    )
    if not gpu:
        st.caption("float16 and bfloat16 are offered when the server has a CUDA GPU.")
    elif dtype != "float32":
        st.caption(
            f"Half precision rounds every input: errors near {TOLERANCES[dtype]:g} are "
            "expected, not a bug."
        )
    return view


def report(model: ModelHandle, prompt: str, dtype: KernelDType) -> KernelReport | job_view.Pending:
    """The kernel against the model on every head, as a job."""
    key = KernelKey(session.allowed_spec(model), prompt, dtype, MAX_TOKENS)
    return job_view.run_job(
        key,
        "Running the kernel on every layer",
        lambda progress: check_kernel(model, prompt, max_tokens=MAX_TOKENS, dtype=dtype),
        cost=kernel_cost(model),
    )


def kernel_cost(model: ModelHandle) -> Cost:
    """The kernel check on the prompt's first :data:`MAX_TOKENS` tokens.

    Memory: four pattern-sized float32 arrays (the pass's patterns and their stack in the
    inputs, the kernel's patterns layer by layer and their stack in the report), the float64
    rebuild of one layer's patterns beside its difference from the model's (four float64
    layers), and the pass's working memory and float32 logits, with
    :func:`models.cost.with_slack` (measured on SmolLM2 at 256 tokens: 304 to 342 MiB over four
    runs, where the arrays counted come to 359).
    """
    facts = model.facts
    layer = facts.pattern_bytes(MAX_TOKENS) // max(facts.n_layers, 1)
    logits = 4 * MAX_TOKENS * vocab_size(model)
    held = (
        4 * facts.pattern_bytes(MAX_TOKENS)
        + 4 * 2 * layer
        + facts.activation_bytes(MAX_TOKENS)
        + logits
    )
    return Cost(flops=3 * facts.forward_flops(MAX_TOKENS), peak_bytes=with_slack(held))


def summary(found: KernelReport) -> None:
    st.markdown(
        f"**Ran:** {BACKEND_WORDS[found.backend]} (`{found.backend}`) on "
        f"**{found.device_text}**, dtype **{found.dtype}**."
    )
    same = (
        "it walks the same tiles with the same online softmax and returns the same "
        "log-sum-exp, so the numbers below check that algorithm."
    )
    if found.device != "cuda":
        st.info(
            "The Triton kernel needs a CUDA GPU. This server has none, so the tiled PyTorch "
            f"path ran instead: {same}"
        )
    elif found.backend == "torch-tiled":
        st.info(
            f"Triton is not installed on this server, so the tiled PyTorch path ran on the "
            f"GPU: {same}"
        )
    st.caption(
        f"Inputs: {found.inputs_note}. A float64 naive rebuild from the same inputs "
        f"sits {found.reference_error:.1e} from hook_pattern."
    )
    c = st.columns(3)
    c[0].metric("Largest pattern error", f"{found.max_pattern_error:.2e}")
    c[1].metric("Largest output error", f"{found.max_output_error:.2e}")
    c[2].metric(f"Within {found.tolerance:g}", "yes" if found.within_tolerance else "no")


def errors(found: KernelReport) -> list[Head]:
    """The two error grids and the per-head table (a row picks the head); returns the heads."""
    left, right = st.columns(2)
    left.plotly_chart(error_grid(found.pattern_error, title=f"{P_ERR} per head"), width="stretch")
    right.plotly_chart(error_grid(found.output_error, title=f"{O_ERR} per head"), width="stretch")
    rows = found.head_rows()
    heads = [Head.parse(row["head"]) for row in rows]
    st.dataframe(
        pd.DataFrame(rows)[["head", P_ERR, O_ERR]],
        hide_index=True,
        key=Kernel.TABLE,
        on_select=lambda: pick_from_table(heads),
        selection_mode="single-row",
        column_config={
            P_ERR: st.column_config.NumberColumn(format="%.2e"),
            O_ERR: st.column_config.NumberColumn(format="%.2e"),
        },
    )
    return heads


def head_view(found: KernelReport, heads: list[Head], view: KernelView) -> None:
    st.subheader("One head: model, kernel and their difference")
    worst = heads[int(found.pattern_error.argmax())]
    seed_widgets({Kernel.HEAD: state.shown_head(view, heads, worst)})
    head = st.selectbox(
        "Head (L.H)",
        heads,
        key=Kernel.HEAD,
        on_change=_head_changed,
        format_func=str,
        help="Or click a row of the table above.",
    )
    labels = [f"({i}) {tok}" for i, tok in enumerate(found.tokens)]
    st.plotly_chart(
        pattern_comparison(
            found.model_patterns[head.layer, head.index],
            found.kernel_patterns[head.layer, head.index],
            labels,
            causal=found.causal,
            title=f"Head {head}",
        ),
        width="stretch",
    )
    st.markdown(f"[Open head {head} in the explorer]({session.explorer_link(head)})")


def timings(found: KernelReport) -> None:
    st.subheader("Timings")
    st.dataframe(
        pd.DataFrame(found.timing_rows()),
        hide_index=True,
        column_config={
            "median ms": st.column_config.NumberColumn(format="%.3f"),
            "× fastest": st.column_config.NumberColumn(format="%.1f"),
        },
    )
    n_tokens = len(found.tokens)
    st.caption(
        f"Measured when this check ran on layer {found.timing_layer}'s tensors ({n_tokens} tokens, "
        "every head at once): median of the repeats after one warm-up call. At this size "
        "fixed per-call costs dominate, and other work on the server shifts the numbers."
    )
    if found.backend == "torch-tiled":
        st.caption(
            f"No Triton kernel here: these are {found.device.upper()} times of the "
            "PyTorch tiled path, which loops over tiles in Python; SDPA runs PyTorch's "
            "fused native code."
        )


def link(view: KernelView) -> None:
    """The page's link (model, prompt, dtype, head) in the address bar and on the page."""
    components.sync_url(session.page_query(view), key=Kernel.URL)
    st.markdown(f"[Link to this view]({session.page_url(view)})")
