"""Classroom sections that need no model: head sharing, costs, positions, failure modes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from models.classroom import costs, failures, positions, sharing
from models.classroom.steps import MatrixError, parse_matrix
from models.model.facts import ModelFacts
from ui.keys import Classroom
from ui.session_state import seed_widgets
from ui.widgets.matrix import show
from viz.classroom_figures import (
    cost_chart,
    labels,
    sharing_diagram,
    sinusoid_heatmap,
    small_heatmap,
)

K_H, K_G, K_SHARE_DHEAD = Classroom.SHARE_H, Classroom.SHARE_G, Classroom.SHARE_D_HEAD
K_PRESET, K_DTYPE = Classroom.COST_PRESET, Classroom.COST_DTYPE
K_BATCH, K_SEQ = Classroom.COST_BATCH, Classroom.COST_SEQ
CFG_FIELDS = {
    "n_layers": ("Layers", 1000),
    "d_model": ("d_model", 65_536),
    "n_heads": ("Query heads (h)", 1024),
    "n_kv_heads": ("KV heads (g)", 1024),
    "d_head": ("d_head", 1024),
}
CUSTOM = "Custom (type below)"


def _param_rows(d_model: int, h: int, d_head: int, variants: dict[str, int]) -> pd.DataFrame:
    rows = []
    for name, g in variants.items():
        p = sharing.attention_params(d_model, h, g, d_head)
        rows.append({"variant": name, "KV heads": g, **{k: f"{v:,}" for k, v in p.items()}})
    return pd.DataFrame(rows).set_index("variant")


def head_sharing(facts: ModelFacts | None) -> None:
    """Which query heads read which key/value heads, and the weights each variant needs."""
    st.subheader("MHA, GQA, MQA: sharing keys and values")
    c = st.columns(3)
    h = int(c[0].number_input("Query heads h", 1, 64, 8, key=K_H))
    options = sharing.divisors(h)
    if st.session_state.get(K_G) not in options:
        seed_widgets({K_G: options[len(options) // 2]})
    g = c[1].selectbox("Key/value heads g (divides h)", options, key=K_G)
    d_head = int(c[2].number_input("d_head", 1, 512, 64, key=K_SHARE_DHEAD))
    kind = sharing.sharing_kind(h, g)
    st.plotly_chart(
        sharing_diagram(sharing.kv_groups(h, g), f"{kind}: h = {h}, g = {g}"),
        key=Classroom.SHARE_FIGURE,
    )
    d_model = h * d_head
    st.caption(
        f"Weights of one attention layer with d_model = h × d_head = {d_model:,} "
        "(biases not counted): W_Q = d_model·h·d_head, W_K = W_V = d_model·g·d_head, "
        "W_O = h·d_head·d_model. Fewer KV heads shrink W_K, W_V and the KV cache."
    )
    st.table(_param_rows(d_model, h, d_head, {"MHA": h, f"{kind} (yours)": g, "MQA": 1}))
    if facts is not None:
        kv = sharing.kv_groups(facts.n_heads, facts.n_kv_heads)
        st.plotly_chart(
            sharing_diagram(
                kv,
                f"{facts.name}: {facts.attention_kind}, "
                f"{facts.n_heads} query / {facts.n_kv_heads} KV heads",
            ),
            key=Classroom.SHARE_MODEL_FIGURE,
        )
        p = sharing.attention_params(facts.d_model, facts.n_heads, facts.n_kv_heads, facts.d_head)
        st.caption(
            f"Per layer: {p['total']:,} projection weights (biases not counted), "
            f"{facts.n_layers * p['total']:,} over {facts.n_layers} layers."
        )


def _model_config(facts: ModelFacts) -> costs.AttentionConfig:
    return costs.AttentionConfig(
        facts.n_layers, facts.d_model, facts.n_heads, facts.n_kv_heads, facts.d_head
    )


def _fill_preset(presets: dict[str, costs.AttentionConfig]) -> None:
    cfg = presets.get(str(st.session_state.get(K_PRESET)))
    if cfg is not None:
        for field, (_label, most) in CFG_FIELDS.items():
            seed_widgets({Classroom.config(field): min(getattr(cfg, field), most)})


def _mark_custom() -> None:
    seed_widgets({K_PRESET: CUSTOM})


def _config_inputs(facts: ModelFacts | None) -> costs.AttentionConfig:
    presets = dict(costs.PRESETS)
    if facts is not None:
        presets = {f"Loaded model ({facts.name})": _model_config(facts), **presets}
    missing = any(Classroom.config(field) not in st.session_state for field in CFG_FIELDS)
    if st.session_state.get(K_PRESET) not in presets or missing:
        if st.session_state.get(K_PRESET) != CUSTOM or missing:
            seed_widgets({K_PRESET: next(iter(presets))})
        _fill_preset(presets)
    st.selectbox(
        "Start from",
        [*presets, CUSTOM],
        key=K_PRESET,
        on_change=_fill_preset,
        args=(presets,),
    )
    c = st.columns(len(CFG_FIELDS))
    values = {
        field: int(
            col.number_input(label, 1, most, key=Classroom.config(field), on_change=_mark_custom)
        )
        for col, (field, (label, most)) in zip(c, CFG_FIELDS.items(), strict=True)
    }
    return costs.AttentionConfig(**values)


def cost_calculator(facts: ModelFacts | None) -> None:
    """FLOPs of one attention layer and KV-cache memory, against sequence length."""
    st.subheader("What attention costs")
    cfg = _config_inputs(facts)
    for problem in cfg.problems():
        st.error(problem)
    if cfg.problems():
        return
    c = st.columns(3)
    dtype = c[0].selectbox("Cache dtype", list(costs.DTYPE_BYTES), index=1, key=K_DTYPE)
    batch = int(c[1].number_input("Batch", 1, 4096, 1, key=K_BATCH))
    n = int(c[2].number_input("Sequence length n", 1, costs.MAX_SEQ, 4096, key=K_SEQ))
    width = costs.DTYPE_BYTES[dtype]
    parts = costs.attention_flops(n, cfg)
    table = pd.DataFrame(
        {
            "part": [costs.PART_NAMES[k] for k in parts],
            "FLOPs": [costs.human_flops(v) for v in parts.values()],
        }
    )
    total = sum(parts.values())
    m = st.columns(3)
    m[0].metric("FLOPs, one layer, one sequence", costs.human_flops(total))
    m[1].metric("KV cache per token", costs.human_bytes(costs.kv_cache_bytes(1, cfg, 1, width)))
    m[2].metric(
        f"KV cache, batch {batch} × {n:,} tokens",
        costs.human_bytes(costs.kv_cache_bytes(n, cfg, batch, width)),
    )
    st.table(table.set_index("part"))
    if cfg.n_heads * cfg.d_head == cfg.d_model and cfg.n_kv_heads == cfg.n_heads:
        textbook = costs.human_flops(costs.textbook_flops(n, cfg.d_model))
        st.caption(
            f"Check: 8 n d² + 4 n² d = {textbook}"
            " (multi-head, h·d_head = d_model). A multiply-add counts as 2 FLOPs; the "
            "softmax's n² exponentials are left out."
        )
    lengths = costs.sequence_lengths()
    linear, quadratic = costs.linear_and_quadratic(lengths, cfg)
    cross = costs.crossover_length(cfg)
    st.plotly_chart(
        cost_chart(
            lengths,
            {
                "projections (∝ n)": linear,
                "Q Kᵀ and A V (∝ n²)": quadratic,
                "total": linear + quadratic,
            },
            title="FLOPs of one attention layer",
            y_title="FLOPs",
            fmt=costs.human_flops,
            base=10,
            crossover=cross,
        ),
        key=Classroom.FLOPS_FIGURE,
    )
    st.caption(
        f"Takeaway: below n ≈ {cross:,.0f} the projections dominate; above it the n² "
        "score and mixing terms take over and keep growing four times per doubling."
    )
    series = {"this config": costs.kv_cache_bytes(lengths, cfg, batch, width)}
    series.update(
        {name: costs.kv_cache_bytes(lengths, p, batch, width) for name, p in costs.PRESETS.items()}
    )
    st.plotly_chart(
        cost_chart(
            lengths,
            series,
            title=f"KV cache ({dtype}, batch {batch})",
            y_title="memory",
            fmt=costs.human_bytes,
            base=32,
        ),
        key=Classroom.KV_FIGURE,
    )
    st.caption(
        "Takeaway: the cache grows linearly with length, times 2 · layers · KV heads · "
        "d_head bytes per token. Per layer, GQA with 8 KV heads keeps 1/4 of what 32 "
        "would, MQA 1/32. The 70B-like line has 80 layers against the 7B-like 32 and "
        "8 KV heads against 32, so its whole cache is 80/32 × 8/32 = 0.625 of the "
        "7B-like one: a model twenty times larger holds a smaller cache."
    )
    st.page_link(
        "pages/generate.py",
        label="See the cache grow on a real model: Generate",
        icon=":material/edit_note:",
    )


def _mask_chart(allowed: np.ndarray, pos: list[str], key: str) -> None:
    """What a mask adds to the scores: 0 where a query may read a key, -inf where it may not."""
    added = np.where(allowed, 0.0, -np.inf)
    st.plotly_chart(
        small_heatmap(
            added,
            title="added to the scores",
            x_labels=pos,
            y_labels=pos,
            decimals=0,
            zmin=-1,
            zmax=1,
        ),
        key=key,
    )


def _rope_demo() -> None:
    st.markdown(
        "**RoPE.** Rotate each pair of dimensions of q and k by an angle proportional "
        "to the position; the score then only sees how far apart they are."
    )
    c = st.columns(2)
    q_text = c[0].text_input("q (even length, up to 8)", "1, 0.5, -0.3, 0.8", key=Classroom.ROPE_Q)
    k_text = c[1].text_input("k (same length)", "0.2, 1, 0.7, -0.5", key=Classroom.ROPE_K)
    try:
        q, k = parse_matrix(q_text, "q", 8), parse_matrix(k_text, "k", 8)
        if q.shape != k.shape or q.shape[0] != 1 or q.shape[1] % 2:
            raise MatrixError("q and k must be single rows of the same even length.")
    except MatrixError as err:
        st.error(str(err))
        return
    n = 6
    scores = positions.rope_scores(q[0], k[0], n)
    pos = [f"pos {i}" for i in range(n)]
    show(scores, pos, pos, decimals=4, title="rotated q at position i · rotated k at position j")
    st.caption(
        f"Every diagonal (same offset i − j) holds one number: the largest spread along "
        f"a diagonal is {positions.diagonal_spread(scores):.1e}, rounding error only. "
        "Takeaway: RoPE turns absolute positions into a relative score."
    )


def _alibi_demo() -> None:
    st.markdown(
        "**ALiBi.** No position vectors at all: add −m·(i − j) to the scores, a "
        "penalty that grows with distance, with a different slope m per head."
    )
    c = st.columns(2)
    h = int(c[0].selectbox("Heads", [4, 8, 16], index=1, key=Classroom.ALIBI_HEADS))
    head = int(c[1].number_input("Head", 0, h - 1, 0, key=Classroom.ALIBI_HEAD))
    slopes = positions.alibi_slopes(h)
    st.caption("Slopes 2^(−8(head+1)/h): " + ", ".join(f"{m:.4g}" for m in slopes))
    n = 6
    bias = positions.alibi_bias(n, float(slopes[head]), causal=True)
    flat = positions.pattern_with_bias(np.zeros((n, n)), np.where(np.isinf(bias), -np.inf, 0.0))
    tilted = positions.pattern_with_bias(np.zeros((n, n)), bias)
    pos = labels("t", n)
    show(
        bias,
        pos,
        pos,
        decimals=3,
        title=f"bias added to the scores, head {head} (m = {slopes[head]:.4g})",
    )
    cols = st.columns(2)
    with cols[0]:
        show(
            flat,
            pos,
            pos,
            decimals=3,
            title="equal scores, causal mask only",
            shade=True,
            shade_range=(0.0, 1.0),
        )
    with cols[1]:
        show(
            tilted,
            pos,
            pos,
            decimals=3,
            title="equal scores + ALiBi",
            shade=True,
            shade_range=(0.0, 1.0),
        )
    st.caption("Takeaway: steep heads look only nearby; shallow heads still read far back.")


def position_section() -> None:
    """Sinusoids, RoPE, ALiBi, the causal mask and a sliding window."""
    st.subheader("Where is each token? Positions and masks")
    c = st.columns(2)
    n_pos = int(c[0].slider("Positions", 8, 256, 64, key=Classroom.SINE_POSITIONS))
    d_model = int(c[1].slider("d_model", 8, 256, 64, step=2, key=Classroom.SINE_WIDTH))
    st.plotly_chart(
        sinusoid_heatmap(positions.sinusoidal(n_pos, d_model)), key=Classroom.SINE_FIGURE
    )
    st.caption(
        "Takeaway: each pair of dimensions is a clock at its own speed; the fast ones on "
        "the left tell neighbours apart, the slow ones on the right tell far positions "
        "apart."
    )
    _rope_demo()
    _alibi_demo()
    n = 8
    pos = labels("t", n)
    c = st.columns(2)
    with c[0]:
        st.markdown("**Causal mask.** Query i sees keys 1…i.")
        _mask_chart(positions.causal_mask(n), pos, Classroom.CAUSAL_FIGURE)
        st.caption(
            "Takeaway: a decoder can be trained on every position at once without "
            "letting any token read its own future."
        )
    with c[1]:
        w = int(st.slider("Window w", 1, n, 3, key=Classroom.WINDOW))
        st.markdown(f"**Sliding window.** Query i sees only the last {w} keys.")
        _mask_chart(positions.sliding_window_mask(n, w), pos, Classroom.WINDOW_FIGURE)
        st.caption(
            f"Takeaway: cost grows as n·w instead of n², and stacking layers still "
            f"passes information further: 32 layers reach {positions.reach(32, w):,} "
            "tokens back."
        )


def failure_section() -> None:
    """Softmax saturation, attention sinks, and why naive attention is memory-bound."""
    st.subheader("When attention goes wrong, or slow")
    d_k = int(
        st.select_slider("d_k", [4, 16, 64, 128, 256, 1024], 128, key=Classroom.SATURATION_DK)
    )
    sat = failures.saturation(d_k)
    st.table(
        pd.DataFrame(
            {
                "": [
                    "spread (std) of the logits",
                    "largest weight in a row",
                    "size of the softmax gradient",
                ],
                "q · k": [f"{sat.logit_std:.2f}", f"{sat.top_weight:.3f}", f"{sat.grad_norm:.3f}"],
                "q · k / √d_k": [
                    f"{sat.scaled_std:.2f}",
                    f"{sat.scaled_top_weight:.3f}",
                    f"{sat.scaled_grad_norm:.3f}",
                ],
            }
        ).set_index("")
    )
    st.markdown(
        "**Softmax saturation.** Unscaled, the logits spread like √d_k, one key takes "
        "almost all the weight and the gradient through the softmax nearly vanishes."
    )
    st.page_link(
        "pages/scaling.py", label="Sweep the scale on a real model", icon=":material/thermostat:"
    )
    st.markdown(
        "**Attention sinks.** A row must sum to 1, so a head with nothing useful to read "
        "parks its weight somewhere harmless, usually the first token or a separator."
    )
    st.page_link(
        "pages/heads.py",
        label="Find sink heads in the loaded model",
        icon=":material/manage_search:",
    )
    n = int(st.select_slider("n", [1024, 4096, 16384, 65536], 16384, key=Classroom.MEMORY_N))
    t = failures.hbm_traffic(n, 128)
    st.markdown(
        f"**Memory, not arithmetic.** One head, n = {n:,}, d_head = 128, fp16, "
        f"{costs.human_flops(t['flops'])} of work. Naive attention writes the n × n scores to GPU "
        f"memory and reads them back: {costs.human_bytes(t['naive'])} moved, about "
        f"{t['naive_intensity']:.0f} FLOPs per byte, far below the ~{failures.H100_RIDGE:.0f} an "
        "H100 needs to keep its arithmetic busy, so it waits on memory. FlashAttention computes "
        "the scores tile by tile in on-chip memory with an online softmax (a running max and sum "
        f"per row) and never writes them: {costs.human_bytes(t['tiled'])} moved "
        f"({t['tiled_intensity']:,.0f} FLOPs per byte; at most "
        f"{costs.human_bytes(t['tiled_no_cache'])} if every re-read of K and V missed the cache)."
    )
    row = np.array([0.5, 2.0, -1.0, 3.0, 0.0, 1.0])
    trace, weights = failures.online_softmax_trace(row, tile=2)
    st.caption(
        "Online softmax on one row, two keys per tile: for each tile, m ← max(m, tile "
        "max) and ℓ ← ℓ·e^(old m − new m) + Σ e^(x − m); at the end "
        "weight = e^(x − m) / ℓ."
    )
    st.dataframe(
        pd.DataFrame(trace).rename(
            columns={
                "tile": "tile",
                "keys": "keys read",
                "running_max": "running max m",
                "running_sum": "running sum ℓ",
            }
        ),
        hide_index=True,
        key=Classroom.ONLINE_TABLE,
    )
    show(
        weights[None, :],
        ["online"],
        labels("k", len(row)),
        decimals=3,
        title=f"weights from the running max and sum (row {', '.join(f'{x:g}' for x in row)})",
    )
    plain = positions.pattern_with_mask(row[None, :], np.ones((1, len(row)), bool))[0]
    gap = float(np.abs(weights - plain).max())
    st.caption(f"Largest difference from the ordinary softmax: {gap:.1e}.")
    st.page_link(
        "pages/kernel.py",
        label="Compare the app's tiled kernel with the model",
        icon=":material/memory:",
    )
