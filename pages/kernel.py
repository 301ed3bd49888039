"""Kernel check: the app's own attention kernel run on the model's q, k, v, head by head."""

import pandas as pd
import streamlit as st
import torch

import app_state
from models.attention.check import BACKEND_WORDS, TOLERANCES
from models.errors import UserError
from ui import caches
from ui.text import md
from viz.kernel_figures import error_grid, pattern_comparison

K_DTYPE, K_HEAD, K_TABLE = "kernel_dtype", "kernel_head", "kernel_table"
P_ERR, O_ERR = "max |P_kernel - P_model|", "max |O_kernel - z_model|"


def pick_from_table(heads: list[str]) -> None:
    rows = st.session_state[K_TABLE].selection.rows
    if rows:
        st.session_state[K_HEAD] = heads[rows[0]]


def header(facts) -> str:
    return (f"**{md(facts.name)}** · {facts.n_layers} layers × {facts.n_heads} heads "
            f"({facts.attention_kind}, {facts.n_kv_heads} key/value heads) · d_head "
            f"{facts.d_head} · {'causal' if facts.causal else 'bidirectional: no mask'} · "
            f"positions: {facts.positional}")


def dtype_choice() -> str:
    gpu = torch.cuda.is_available()
    options = ["float32", "float16", "bfloat16"] if gpu else ["float32"]
    dtype = st.selectbox("Kernel dtype", options, key=K_DTYPE,
                         help="q, k and v are cast to this dtype before the kernel runs.")
    if not gpu:
        st.caption("float16 and bfloat16 are offered when the server has a CUDA GPU.")
    elif dtype != "float32":
        st.caption(f"Half precision rounds every input: errors near {TOLERANCES[dtype]:g} are "
                   "expected, not a bug.")
    return dtype


def summary(report) -> None:
    st.markdown(f"**Ran:** {BACKEND_WORDS[report.backend]} (`{report.backend}`) on "
                f"**{report.device_text}**, dtype **{report.dtype}**.")
    same = ("it walks the same tiles with the same online softmax and returns the same "
            "log-sum-exp, so the numbers below check that algorithm.")
    if report.device != "cuda":
        st.info("The Triton kernel needs a CUDA GPU. This server has none, so the tiled PyTorch "
                f"path ran instead: {same}")
    elif report.backend == "torch-tiled":
        st.info(f"Triton is not installed on this server, so the tiled PyTorch path ran on the "
                f"GPU: {same}")
    st.caption(f"Inputs: {report.inputs_note}. A float64 naive rebuild from the same inputs "
               f"sits {report.reference_error:.1e} from hook_pattern.")
    c = st.columns(3)
    c[0].metric("Largest pattern error", f"{report.max_pattern_error:.2e}")
    c[1].metric("Largest output error", f"{report.max_output_error:.2e}")
    c[2].metric(f"Within {report.tolerance:g}", "yes" if report.within_tolerance else "no")


def head_view(report, heads: list[str]) -> None:
    st.subheader("One head: model, kernel and their difference")
    head = st.selectbox("Head (L.H)", heads, key=K_HEAD,
                        help="Or click a row of the table above.")
    layer, index = (int(part) for part in head.split("."))
    labels = [f"({i}) {tok}" for i, tok in enumerate(report.tokens)]
    st.plotly_chart(pattern_comparison(report.model_patterns[layer, index],
                                       report.kernel_patterns[layer, index], labels,
                                       causal=report.causal, title=f"Head {head}"),
                    width="stretch")
    st.markdown(f"[Open head {head} in the explorer]({app_state.explorer_link(layer, index)})")


def timings(report) -> None:
    st.subheader("Timings")
    st.dataframe(pd.DataFrame(report.timing_rows()), hide_index=True,
                 column_config={"median ms": st.column_config.NumberColumn(format="%.3f"),
                                "× fastest": st.column_config.NumberColumn(format="%.1f")})
    n_tokens = len(report.tokens)
    st.caption(f"Measured just now on layer {report.timing_layer}'s tensors ({n_tokens} tokens, "
               "every head at once): median of the repeats after one warm-up call. At this size "
               "fixed per-call costs dominate, and other work on the server shifts the numbers.")
    if report.backend == "torch-tiled":
        st.caption(f"No Triton kernel here: these are {report.device.upper()} times of the "
                   "PyTorch tiled path, which loops over tiles in Python; SDPA runs PyTorch's "
                   "fused native code.")


app_state.page_title("Kernel check")
st.caption("The app ships its own attention kernel (FlashAttention-style: it never builds the "
           "full pattern, only a log-sum-exp per row). Here it runs on the model's own q, k and v "
           "for every head, and its output is compared with what the model computed.")
model = app_state.active_model()
prompt = app_state.current_prompt()
if model is not None:
    st.caption(header(model.facts))
    dtype = dtype_choice()
    try:
        with st.spinner("Running the kernel on every layer…"):
            report = caches.kernel_report(model.spec, prompt, dtype)
    except UserError as err:
        app_state.show_error(err)
        report = None
    if report is not None:
        if report.n_prompt_tokens > len(report.tokens):
            st.warning(f"The prompt has {report.n_prompt_tokens:,} tokens; this page checks the "
                       f"first {len(report.tokens):,}.")
        summary(report)
        left, right = st.columns(2)
        left.plotly_chart(error_grid(report.pattern_error, title=f"{P_ERR} per head"),
                          width="stretch")
        right.plotly_chart(error_grid(report.output_error, title=f"{O_ERR} per head"),
                           width="stretch")
        rows = report.head_rows()
        heads = [row["head"] for row in rows]
        if st.session_state.get(K_HEAD) not in heads:
            st.session_state[K_HEAD] = heads[int(report.pattern_error.argmax())]
        st.dataframe(pd.DataFrame(rows)[["head", P_ERR, O_ERR]], hide_index=True, key=K_TABLE,
                     on_select=lambda: pick_from_table(heads), selection_mode="single-row",
                     column_config={P_ERR: st.column_config.NumberColumn(format="%.2e"),
                                    O_ERR: st.column_config.NumberColumn(format="%.2e")})
        head_view(report, heads)
        timings(report)
