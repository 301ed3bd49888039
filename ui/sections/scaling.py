"""Scaling sweep sections: the controls, the saturation panels on the model's own logits, the
loss over the factor, and the synthetic check (layout only; maths in models.scaling)."""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from models.cost import Cost, with_slack
from models.errors import UserError
from models.head import Head, all_heads
from models.model.facts import ModelFacts
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from models.model.weights import vocab_size
from models.scaling import capture as scaling_capture
from models.scaling.capture import ScoreCapture, loss_unavailable
from models.scaling.maths import SweepStats, scaled_patterns, sweep, synthetic_panel
from ui import session
from ui.keys import Scaling
from ui.runtime import server
from ui.runtime.job_keys import LogitsKey, LossSweepKey, SweepKey, SyntheticKey
from ui.session_state import keep, seed_widgets
from ui.state import scaling as sc
from ui.state.scaling import ScalingView
from ui.text import md
from ui.widgets import components, job_view
from viz import scaling_figures as figs
from viz.heatmap import head_heatmap

MAX_TOKENS = 256
AXIS_WORDS: dict[sc.Axis, str] = {
    "factor": "Factor c × the model's own scale",
    "alpha": "Divide q · k by d_k^α",
}


def fmt_c(c: float) -> str:
    return figs.factor_label(c)


def current_view(facts: ModelFacts | None = None) -> ScalingView:
    """The page's view: from the link the first time, then as the visitor changes it; fitted
    to ``facts``' heads where given (with a note)."""
    found = session.page_view(Scaling.VIEW, "scaling", ScalingView)
    notes: list[str] = []
    if facts is not None:
        found, notes = sc.clamp(found, facts.n_layers, facts.n_heads)
    for note in notes:
        st.caption(md(note))
    return save(found)


def save(view: ScalingView) -> ScalingView:
    keep(Scaling.VIEW, view)
    return view


def _grid_changed() -> None:
    ss = st.session_state
    view = current_view()
    ends = ss.get(Scaling.RANGE) if view.axis == "factor" else None
    low, high = ends if isinstance(ends, (tuple, list)) else (view.low, view.high)
    save(sc.with_grid(view, ss[Scaling.AXIS], low, high, int(ss[Scaling.POINTS])))


def _head_changed() -> None:
    save(sc.choose_head(current_view(), st.session_state[Scaling.HEAD]))


def _point_changed() -> None:
    save(sc.choose_point(current_view(), int(st.session_state[Scaling.PICK])))


def _seed_changed() -> None:
    save(sc.with_seed(current_view(), int(st.session_state[Scaling.SEED])))


def controls(view: ScalingView, facts: ModelFacts) -> tuple[Head, sc.Grid, int]:
    """Sweep widgets showing ``view``; returns the head, the grid and the point looked at."""
    ss = st.session_state
    c = st.columns([3, 2, 1, 2])
    seed_widgets({Scaling.AXIS: view.axis})
    c[0].radio(
        "Sweep",
        sc.AXES,
        key=Scaling.AXIS,
        horizontal=True,
        format_func=AXIS_WORDS.__getitem__,
        on_change=_grid_changed,
    )
    if view.axis == "factor":
        ends = (view.low, view.high)
        if tuple(ss.get(Scaling.RANGE, ends)) != ends:
            seed_widgets({Scaling.RANGE: ends})
        c[1].select_slider(  # a tuple value makes it a range slider
            "Range of c",
            sc.POWERS,
            value=ends,
            key=Scaling.RANGE,
            format_func=fmt_c,
            on_change=_grid_changed,
        )
    seed_widgets({Scaling.POINTS: view.points})
    c[2].number_input(
        "Points", sc.MIN_POINTS, sc.MAX_POINTS, step=2, key=Scaling.POINTS, on_change=_grid_changed
    )
    heads = list(all_heads(facts.n_layers, facts.n_heads))
    seed_widgets({Scaling.HEAD: sc.head_shown(view)})
    head = c[3].selectbox("Head", heads, key=Scaling.HEAD, format_func=str, on_change=_head_changed)
    found = sc.grid(view, facts.d_head)

    def label(i: int) -> str:
        alpha = "" if found.log_x else f" (α = {found.x[i]:.3g})"
        return f"c = {fmt_c(found.factors[i])}{alpha}"

    seed_widgets({Scaling.PICK: sc.shown_point(view, found)})
    pick = st.select_slider(
        "Point of the sweep shown below",
        range(len(found.factors)),
        key=Scaling.PICK,
        format_func=label,
        on_change=_point_changed,
    )
    return head, found, int(pick)


def logits_cost(model: ModelHandle) -> Cost:
    """One pass over the prompt's first :data:`MAX_TOKENS` tokens, every head's logits kept.

    Memory: four pattern-sized float32 arrays (every head's scores and patterns, copied layer
    by layer into the arrays returned and checked, and as much again held as the pass ends:
    SmolLM2 at 256 tokens peaked at 289 MiB, 4.3 arrays with the logits; the q and k rebuild
    holds three), the pass's working memory and its float32 logits; with slack, as the count
    sits on the peak (one CI run measured 347 MiB against the 341 counted).
    """
    facts = model.facts
    logits = 4 * MAX_TOKENS * vocab_size(model)
    counted = 4 * facts.pattern_bytes(MAX_TOKENS) + facts.activation_bytes(MAX_TOKENS) + logits
    return Cost(flops=2 * facts.forward_flops(MAX_TOKENS), peak_bytes=with_slack(counted))


def stats_cost(cells: int, n_factors: int) -> Cost:
    """The saturation statistics of ``cells`` logits at ``n_factors`` factors."""
    return Cost(flops=40.0 * cells * n_factors, peak_bytes=int(8 * 8 * cells))


def loss_cost(model: ModelHandle, n_factors: int) -> Cost:
    """One forward pass of the model per factor.

    Memory, one pass at a time: its working memory and float32 logits, a block of
    :data:`models.scaling.capture.LOSS_ROWS` positions' float64 log-softmax (the rows in float64
    and their result), and per layer the scaled scores with their mask beside layer 0's scores
    and pattern kept for the check (four layers' patterns). Alone, SmolLM2's pass over 256
    tokens peaks within 1 % of that count (102.6-103.1 MiB against 103.5); beside other work on
    a busy machine the same pass peaked at 160-168 MiB, the allocator serving the blocks from
    fresh memory rather than from what the last block freed. So the estimate allows a second
    logits-sized block and takes :func:`models.cost.with_slack`, like the other close counts.
    """
    facts = model.facts
    vocab = vocab_size(model)
    logits = 4 * MAX_TOKENS * vocab
    log_softmax = 2 * 8 * scaling_capture.LOSS_ROWS * vocab
    layers = 4 * facts.pattern_bytes(MAX_TOKENS) // max(facts.n_layers, 1)
    return Cost(
        flops=n_factors * facts.forward_flops(MAX_TOKENS),
        peak_bytes=with_slack(
            facts.activation_bytes(MAX_TOKENS) + 2 * logits + log_softmax + layers
        ),
    )


def logits(model: ModelHandle, key: LogitsKey) -> ScoreCapture | job_view.Pending:
    """Every head's logits on the prompt's first tokens, as a job."""
    return job_view.run_job(
        key,
        "Capturing every head's attention logits",
        lambda progress: scaling_capture.capture_scores(model, key.prompt, key.max_tokens),
        cost=logits_cost(model),
    )


def sweep_stats(
    key: LogitsKey, found: ScoreCapture, factors: np.ndarray
) -> SweepStats | job_view.Pending:
    values = tuple(float(f) for f in factors)
    return job_view.run_job(
        SweepKey(key, values),
        "Sweeping the scale",
        lambda progress: sweep(found.scores, np.asarray(values), found.softcaps),
        cost=stats_cost(found.scores.size, len(values)),
    )


def loss_curve(
    model: ModelHandle, key: LogitsKey, factors: tuple[float, ...]
) -> list[scaling_capture.FactorLoss] | job_view.Pending:
    """The model's loss at every factor, as one job with progress."""
    return job_view.run_job(
        LossSweepKey(key, factors),
        "Re-running the model at every point",
        lambda p: scaling_capture.loss_curve(model, key.prompt, factors, key.max_tokens, p),
        cost=loss_cost(model, len(factors)),
    )


def loss_section(
    model: ModelHandle,
    key: LogitsKey,
    n_tokens: int,
    factors: np.ndarray,
    x: np.ndarray,
    x_title: str,
    own_x: float,
    pick: int,
    log_x: bool,
) -> None:
    st.subheader("Next-token loss with every head at factor c")
    reason = loss_unavailable(model, n_tokens)
    if reason:
        st.info(reason)
        return
    points = tuple(float(c) for c in factors)
    sweep_key = LossSweepKey(key, points)
    label = f"Run the model at all {len(points)} points ({len(points)} forward passes"
    cost = loss_cost(model, len(points))
    if not job_view.start_button(sweep_key, label, cost, Scaling.LOSS, primary=False):
        return
    try:
        losses = loss_curve(model, key, points)
    except UserError as err:
        session.show_error(err)
        return
    if losses is job_view.MISSING:
        return
    values = np.array([item.loss for item in losses])
    st.plotly_chart(
        figs.loss_figure(x, values, x_title=x_title, own_x=own_x, picked_x=x[pick], log_x=log_x),
        width="stretch",
    )
    own = losses[int(np.argmin(np.abs(np.log(factors))))].loss
    best = int(np.argmin(values))
    st.caption(
        f"Loss at the model's own scale: **{own:.4f}** nats over "
        f"{losses[0].n_predictions} predictions. Lowest on this grid: {values[best]:.4f} "
        f"at c = {fmt_c(factors[best])}. Each point hooks every layer's attention scores, "
        "multiplies the unmasked ones by c and keeps the masked ones masked."
    )


def model_section() -> None:
    model = session.active_model()
    if model is None:
        return
    facts = model.facts
    try:
        key = LogitsKey(session.allowed_spec(model), session.current_prompt(), MAX_TOKENS)
        ids, _ = tokenize(model, key.prompt, MAX_TOKENS)  # a bad prompt is said before asking
    except UserError as err:
        session.show_error(err)
        return
    view = current_view(facts)
    head, found, pick = controls(view, facts)
    factors, x, x_title, own_x, log_x = (
        found.factors,
        found.x,
        found.x_title,
        found.own_x,
        found.log_x,
    )
    cells = facts.n_layers * facts.n_heads * ids.shape[-1] ** 2
    cost = logits_cost(model).then(stats_cost(cells, len(factors)))
    helps = (
        f"One pass over the prompt's first {MAX_TOKENS} tokens keeps every head's logits; the "
        "sweep rescales them."
    )
    label = f"Sweep the model's logits ({len(factors)} points"
    if not job_view.start_button(key, label, cost, Scaling.START, help=helps):
        return
    try:
        cap = logits(model, key)
    except UserError as err:
        session.show_error(err)
        return
    if cap is job_view.MISSING:
        return
    if cap.n_prompt_tokens > cap.n_tokens:
        st.warning(
            f"The prompt has {cap.n_prompt_tokens:,} tokens; this page uses the first "
            f"{cap.n_tokens:,}."
        )
    st.caption(
        f"**{md(facts.name)}** · d_head {facts.d_head} · {cap.n_tokens} tokens · logits "
        f"from `{cap.source}`; softmax of them matches the model's own patterns to "
        f"{cap.max_error:.1e}."
    )
    stats = sweep_stats(key, cap, factors)
    if stats is job_view.MISSING:
        return
    st.plotly_chart(
        figs.saturation_figure(
            stats,
            x,
            x_title=x_title,
            own_x=own_x,
            picked_x=float(x[pick]),
            head=(head.layer, head.index),
            log_x=log_x,
        ),
        width="stretch",
    )
    st.caption(
        f"Means over {stats.n_rows} query rows per head ({stats.n_rows_norm} for the "
        "normalised entropy: a row with one allowed key has log 1 = 0 and is left out). "
        "Dashed red: the model's own scale; dotted grey: the point picked above "
        "(one red line when the point picked is the model's own)."
    )
    labels = [f"({i}) {tok}" for i, tok in enumerate(cap.tokens)]
    scores = torch.from_numpy(cap.scores[head.layer, head.index])
    limit = cap.softcap(head.layer)
    if limit is not None:
        st.caption(capped_text(cap, head, limit))
    shown = [0, pick, len(factors) - 1]
    st.subheader(f"Head {head} at the point picked, c = {fmt_c(factors[pick])}")
    st.plotly_chart(
        head_heatmap(
            scaled_patterns(scores, float(factors[pick]), limit).numpy(),
            labels,
            causal=facts.causal,
            title=f"Head {head} at c = {fmt_c(factors[pick])}",
        ),
        width="stretch",
    )
    st.subheader(f"Head {head} at both ends of the sweep and the point picked")
    st.plotly_chart(
        figs.extremes_figure(
            [scaled_patterns(scores, float(factors[i]), limit).numpy() for i in shown],
            [f"c = {fmt_c(factors[i])}" for i in shown],
            labels,
            causal=facts.causal,
        ),
        width="stretch",
    )
    st.caption("Small c flattens every row towards uniform; large c pushes it to one-hot.")
    loss_section(model, key, cap.n_tokens, factors, x, x_title, own_x, pick, log_x)


def capped_text(cap: ScoreCapture, head: Head, limit: float) -> str:
    """A soft-capped layer's logits, raw and capped, and how the sweep treats them."""
    raw = cap.scores[head.layer, head.index]
    capped = cap.capped_scores(head.layer)[head.index]
    seen = np.isfinite(raw)
    return (
        f"Layer {head.layer} caps its logits before the softmax: {limit:g} · tanh(s / "
        f"{limit:g}). Head {head}'s raw logits run from {raw[seen].min():.3g} to "
        f"{raw[seen].max():.3g}, capped from {capped[seen].min():.3g} to "
        f"{capped[seen].max():.3g}. The sweep scales the raw logits and caps them again, as "
        "the model would with another scale."
    )


def synthetic_section() -> None:
    st.header("Synthetic check: random q and k")
    seed_widgets({Scaling.SEED: current_view().seed})
    seed = int(st.number_input("Seed", 0, sc.MAX_SEED, key=Scaling.SEED, on_change=_seed_changed))
    with st.spinner("Sampling random vectors…"):
        panel = server.current().derived.get_or_compute(
            SyntheticKey(seed), lambda: synthetic_panel(seed=seed)
        )
    st.caption(
        f"Entries drawn i.i.d. from N(0, 1), seed {panel.seed}. Variance: "
        f"{panel.n_pairs:,} independent (q, k) pairs per d_k. Max weight: "
        f"{panel.n_rows:,} rows per d_k, each one query against {panel.n_keys} keys."
    )
    left, right = st.columns(2)
    left.plotly_chart(figs.variance_figure(panel), width="stretch")
    right.plotly_chart(figs.max_weight_figure(panel), width="stretch")
    st.dataframe(
        {
            "d_k": panel.d_ks,
            "Var(q·k)": panel.var_raw,
            "Var(q·k) / d_k": panel.var_scaled,
            "max weight, raw": panel.max_raw,
            "max weight, ÷√d_k": panel.max_scaled,
        },
        hide_index=True,
    )


def link() -> None:
    """The page's link (model, prompt, the sweep, head, point, seed) in the address bar and on
    the page."""
    view = current_view()
    components.sync_url(session.page_query(view), key=Scaling.URL)
    st.markdown(f"[Link to this view]({session.page_url(view)})")
