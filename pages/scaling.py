"""Scaling sweep: why attention divides q . k by sqrt(d_k), on the loaded model and on random data."""


import numpy as np
import streamlit as st
import torch

import app_state
from models.errors import UserError
from models.scaling.capture import loss_unavailable
from models.scaling.maths import alpha_to_factor, factor_grid, scaled_patterns
from ui import caches
from ui.text import md
from viz import scaling_figures as figs
from viz.heatmap import head_heatmap

POWERS = [2.0**p for p in range(-6, 7)]
AXES = {"Factor c × the model's own scale": "factor", "Divide q · k by d_k^α": "alpha"}
K_AXIS, K_RANGE, K_N, K_HEAD = "scaling_axis", "scaling_range", "scaling_points", "scaling_head"
K_PICK, K_LOSS, K_SEED = "scaling_pick", "scaling_loss", "scaling_seed"
K_SHAPE = "scaling_grid_shape"


def fmt_c(c: float) -> str:
    return f"{c:.3g}" if c >= 1 else f"1/{1 / c:.3g}"


def grid(d_head: int) -> tuple[np.ndarray, np.ndarray, str, float, bool]:
    """Factors, their x values, the x title, the x of the model's own scale, log axis or not."""
    n = st.session_state.get(K_N, 25)
    if AXES[st.session_state.get(K_AXIS, next(iter(AXES)))] == "alpha":
        alphas = np.linspace(0.0, 1.0, n)
        return alpha_to_factor(alphas, d_head), alphas, "α (logits = q · k / d_k^α)", 0.5, False
    lo, hi = st.session_state.get(K_RANGE, (1 / 16, 16.0))
    if lo >= hi:
        st.info("The range of c needs two different ends; showing 1/16 to 16.")
        lo, hi = 1 / 16, 16.0
    return factor_grid(lo, hi, n), factor_grid(lo, hi, n), "factor c (log scale)", 1.0, True


def controls(facts):
    """Sweep widgets; returns head, factors, x values, x title, own x, log axis, picked index."""
    c = st.columns([3, 2, 1, 2])
    c[0].radio("Sweep", list(AXES), key=K_AXIS, horizontal=True)
    if AXES[st.session_state[K_AXIS]] == "factor":
        c[1].select_slider("Range of c", POWERS, value=(1 / 16, 16.0), key=K_RANGE,
                           format_func=fmt_c)
    c[2].number_input("Points", 5, 61, 25, step=2, key=K_N)
    heads = [f"{l}.{h}" for l in range(facts.n_layers) for h in range(facts.n_heads)]
    c[3].selectbox("Head", heads, key=K_HEAD)
    layer, head = (int(part) for part in st.session_state[K_HEAD].split("."))
    factors, x, x_title, own_x, log_x = grid(facts.d_head)
    own = int(np.argmin(np.abs(np.log(factors))))
    shape = (st.session_state[K_AXIS], st.session_state.get(K_RANGE), len(factors))
    before = st.session_state.get(K_SHAPE, shape)
    st.session_state[K_SHAPE] = shape
    if before != shape or st.session_state.get(K_PICK, len(factors)) >= len(factors):
        st.session_state[K_PICK] = own  # a new grid starts at the model's own scale

    def label(i: int) -> str:
        return f"c = {fmt_c(factors[i])}" + ("" if log_x else f" (α = {x[i]:.3g})")

    pick = st.select_slider("Point of the sweep shown below", range(len(factors)), key=K_PICK,
                            format_func=label)
    return layer, head, factors, x, x_title, own_x, log_x, pick


def loss_section(model, prompt: str, n_tokens: int, factors, x, x_title, own_x, pick, log_x):
    st.subheader("Next-token loss with every head at factor c")
    reason = loss_unavailable(model, n_tokens)
    if reason:
        st.info(reason)
        return
    if not st.toggle("Run the model at every point of the sweep", value=True, key=K_LOSS):
        return
    bar = st.progress(0.0, text="Re-running the model…")
    try:
        losses = []
        for i, c in enumerate(factors):
            losses.append(caches.loss_at_factor(model.spec, prompt, float(c)))
            bar.progress((i + 1) / len(factors), text=f"Re-running the model: c = {fmt_c(c)}")
    except UserError as err:
        app_state.show_error(err)
        return
    finally:
        bar.empty()
    values = np.array([item.loss for item in losses])
    st.plotly_chart(figs.loss_figure(x, values, x_title=x_title, own_x=own_x,
                                     picked_x=x[pick], log_x=log_x), width="stretch")
    own = caches.loss_at_factor(model.spec, prompt, 1.0).loss
    best = int(np.argmin(values))
    st.caption(f"Loss at the model's own scale: **{own:.4f}** nats over "
               f"{losses[0].n_predictions} predictions. Lowest on this grid: {values[best]:.4f} at "
               f"c = {fmt_c(factors[best])}. Each point hooks every layer's attention scores, "
               "multiplies the unmasked ones by c and keeps the masked ones masked.")


def model_section() -> None:
    model = app_state.active_model()
    if model is None:
        return
    prompt = app_state.current_prompt()
    try:
        with st.spinner("Capturing every head's attention logits…"):
            cap = caches.logits(model.spec, prompt)
    except UserError as err:
        app_state.show_error(err)
        return
    facts = model.facts
    if cap.n_prompt_tokens > cap.n_tokens:
        st.warning(f"The prompt has {cap.n_prompt_tokens:,} tokens; this page uses the first "
                   f"{cap.n_tokens:,}.")
    st.caption(f"**{md(facts.name)}** · d_head {facts.d_head} · {cap.n_tokens} tokens · logits from "
               f"`{cap.source}`; softmax of them matches the model's own patterns to "
               f"{cap.max_error:.1e}.")
    layer, head, factors, x, x_title, own_x, log_x, pick = controls(facts)
    with st.spinner("Sweeping…"):
        stats = caches.scaling_sweep(model.spec, prompt, tuple(float(f) for f in factors))
    st.plotly_chart(figs.saturation_figure(stats, x, x_title=x_title, own_x=own_x,
                                           picked_x=x[pick], head=(layer, head), log_x=log_x),
                    width="stretch")
    st.caption(f"Means over {stats.n_rows} query rows per head ({stats.n_rows_norm} for the "
               "normalised entropy: a row with one allowed key has log 1 = 0 and is left out). "
               "Dashed red: the model's own scale; dotted grey: the point picked above.")
    labels = [f"({i}) {tok}" for i, tok in enumerate(cap.tokens)]
    scores = torch.from_numpy(cap.scores[layer, head])
    shown = [0, pick, len(factors) - 1]
    st.plotly_chart(head_heatmap(scaled_patterns(scores, float(factors[pick])).numpy(), labels,
                                 causal=facts.causal, title=f"Head {layer}.{head} at c = "
                                 f"{fmt_c(factors[pick])}"), width="stretch")
    st.plotly_chart(figs.extremes_figure(
        [scaled_patterns(scores, float(factors[i])).numpy() for i in shown],
        [f"c = {fmt_c(factors[i])}" for i in shown], labels, causal=facts.causal),
        width="stretch")
    st.caption("Small c flattens every row towards uniform; large c pushes it to one-hot.")
    loss_section(model, prompt, cap.n_tokens, factors, x, x_title, own_x, pick, log_x)


app_state.page_title("Scaling sweep")
st.markdown(
    "If the entries of q and k are independent with variance 1, the dot product q · k is a sum "
    "of d_k such terms, so its variance is d_k and its spread grows like √d_k (about 11 at "
    "d_k = 128). Logits that far apart make the softmax put almost all weight on one key, and "
    "its Jacobian diag(p) − ppᵀ, which carries the gradient back to q and k, shrinks towards "
    "zero. Dividing by √d_k brings the variance back to 1. Below, the model's own logits are "
    "multiplied by a factor c (c = 1 is the model as trained) to watch this happen.")
st.page_link("pages/classroom.py", label="The maths step by step: Classroom",
             icon=":material/school:")
model_section()

st.header("Synthetic check: random q and k")
seed = st.number_input("Seed", 0, 2**31 - 1, 0, key=K_SEED)
with st.spinner("Sampling random vectors…"):
    panel = caches.synthetic(int(seed))
st.caption(f"Entries drawn i.i.d. from N(0, 1), seed {panel.seed}. Variance: {panel.n_pairs:,} "
           f"independent (q, k) pairs per d_k. Max weight: {panel.n_rows:,} rows per d_k, each "
           f"one query against {panel.n_keys} keys.")
left, right = st.columns(2)
left.plotly_chart(figs.variance_figure(panel), width="stretch")
right.plotly_chart(figs.max_weight_figure(panel), width="stretch")
st.dataframe({"d_k": panel.d_ks, "Var(q·k)": panel.var_raw, "Var(q·k) / d_k": panel.var_scaled,
              "max weight, raw": panel.max_raw, "max weight, ÷√d_k": panel.max_scaled},
             hide_index=True)
