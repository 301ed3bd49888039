"""Head finder: which heads do what, and which can go."""

import numpy as np
import streamlit as st

import app_state
from models.errors import UserError
from models.heads import ablation, scores
from models.heads.induction import MAX_BATCH
from models.heads.loss import loss_kind, reference_task
from models.heads.sample import SAMPLE_TEXT
from models.heads.names import (ABLATION_COLUMNS, COLUMN_HELP, COLUMN_LABELS, RANKING_COLUMN,
                                SCORE_LABELS)
from models.heads.table import (Thresholds, flag_grids,
                                head_table, prune_list, prune_list_json, table_csv)
from ui import caches
from ui.text import md
from viz.heads_figures import pruning_curve, sink_position_grid
from viz.heatmap import score_grid

SCORES = SCORE_LABELS
DEFAULTS = Thresholds()
RANKINGS = {"Zero-ablation loss change": "zero", "Mean-ablation loss change": "mean",
            "Gradient |dL/dξ| (Michel et al.)": "gradient"}
SOURCES = {"your prompt": "prompt", "the repeated random tokens": "repeated"}


def start(key: str, value):
    """Seed a widget's value once; the widget itself is then created without a default."""
    return st.session_state.setdefault(key, value)


def long_work(key: tuple, label: str, work):
    """Return the stored result for ``key`` or run ``work(progress)`` under a progress bar."""
    store = caches.finished_work()
    if key in store:
        return store.get(key)
    bar = st.progress(0.0, text=label)
    done = store.get_or_compute(key, lambda: work(
        lambda f, text: bar.progress(min(max(f, 0.0), 1.0), text=f"{label}: {text}")))
    bar.empty()
    return done


def settings(facts) -> tuple[int, int, int, str, Thresholds]:
    with st.expander("Settings: repeated random tokens and flag thresholds", expanded=False):
        c = st.columns(4)
        longest = max(2, min(500, (facts.n_ctx - 2) // 2))
        # Defaults go through session state so that a shorter context can clamp the span.
        st.session_state["heads_seq_len"] = min(start("heads_seq_len", 50), longest)
        start("heads_batch", 8)
        start("heads_seed", 0)
        seq_len = c[0].number_input("Span length L", 2, longest, key="heads_seq_len")
        batch = c[1].number_input("Sequences (batch)", 1, MAX_BATCH, key="heads_batch")
        seed = c[2].number_input("Seed", 0, 2**31 - 1, key="heads_seed")
        source = c[3].radio("Judge previous/duplicate/current-token heads on", list(SOURCES),
                            key="heads_source")
        c = st.columns(5)
        for name in SCORES:
            start(f"heads_th_{name}", getattr(DEFAULTS, name))
        th = {name: c[i].slider(f"{label} >", 0.0, 1.0, step=0.01, key=f"heads_th_{name}")
              for i, (name, label) in enumerate(SCORES.items())}
    return int(seq_len), int(batch), int(seed), SOURCES[source], Thresholds(**th)


def show_grids(rep, prm, flags, source, run, eps: float) -> None:
    shown = prm if source == "prompt" else rep
    tabs = st.tabs(list(SCORES.values()) + ["Strongest sink anywhere"])
    for tab, (name, label) in zip(tabs, SCORES.items()):
        values = rep.induction if name == "induction" else getattr(
            prm if name == "sink" else shown, name)
        where = "repeated random tokens" if name == "induction" or (
            name != "sink" and source == "repeated") else "your prompt"
        tab.plotly_chart(score_grid(values, title=f"{label} score on {where} (★ flagged)",
                                    flagged=flags[name], zmin=0.0, zmax=1.0), width="stretch")
    tabs[-1].plotly_chart(sink_position_grid(
        prm.top_sink_alpha, prm.top_sink_pos, run.tokens,
        flagged=scores.flag(prm.top_sink_alpha, eps),
        title="Largest alpha over all key positions (hover for the token)"), width="stretch")


def show_pruning(model, run) -> object | None:
    st.subheader("Pruning importance")
    try:
        loss_kind(model)
        ablation.check_hooks(model)
    except UserError as err:
        app_state.show_error(err)
        return None
    c = st.columns(3)
    ref = c[0].radio("Reference text", ["the sidebar prompt", "the bundled sample"],
                     key="heads_ref")
    ranking = RANKINGS[c[1].selectbox("Rank heads by", list(RANKINGS), key="heads_ranking")]
    method = c[2].radio("Prune by", ["zero", "mean"], key="heads_method",
                        format_func=lambda m: f"{m}-ablation", horizontal=True)
    text = run.prompt if ref == "the sidebar prompt" else SAMPLE_TEXT
    try:
        task = reference_task(model, text)
    except UserError as err:
        app_state.show_error(err)
        return None
    n = model.facts.n_total_heads
    start("heads_ablate", n <= 48)  # on by default for small models only
    if not st.toggle(f"Measure it ({2 * n + 2} forward passes and one backward pass, then "
                     f"{n + 1} passes for the pruning curve)", key="heads_ablate"):
        return None
    st.caption("Changing any input stops the measurement; only finished results are kept.")
    imp = long_work(("importance", model.spec, text), "Ablating every head",
                    lambda p: ablation.measure_importance(model, task, p))
    order = ablation.pruning_order(imp.ranking(ranking))
    losses = long_work(("curve", model.spec, text, ranking, method), "Pruning curve",
                       lambda p: ablation.cumulative_pruning(model, task, order, method,
                                                             imp.means, p))
    kind = "next-token" if imp.kind == "next_token" else "masked-token"
    st.caption(f"{kind} cross-entropy over {imp.n_targets} scored tokens; clean loss "
               f"{imp.base_loss:.4f}. Gradient importance is the raw |dL/dξ|, not normalised "
               "per layer. Each point of the curve ablates all k heads in one pass.")
    left, right = st.columns(2)
    values = imp.ranking(ranking)
    top = float(np.nanmax(np.abs(values))) or 1.0  # loss changes can be negative: centre on 0
    left.plotly_chart(score_grid(values, title=f"{RANKING_COLUMN[ranking]} per head",
                                 zmin=0.0 if ranking == "gradient" else -top, zmax=top,
                                 colorscale="Magma" if ranking == "gradient" else "RdBu_r"),
                      width="stretch")
    right.plotly_chart(pruning_curve(losses, order, title=f"Loss with the k least important "
                                     f"heads {method}-ablated", loss_name=f"{kind} loss"),
                       width="stretch")
    plan = prune_list(imp, ranking, method, order, losses, model.facts.name,
                      "sidebar prompt" if text == run.prompt else "bundled sample")
    st.download_button("Download the prune list (JSON)", prune_list_json(plan),
                       file_name="prune_list.json", mime="application/json")
    return imp


app_state.page_title("Head finder")
model, run = app_state.model_and_run()
if run is not None:
    facts = run.facts
    seq_len, batch, seed, source, thresholds = settings(facts)
    try:
        with st.spinner("Scoring every head…"):
            rep = caches.repeated_scores(model.spec, seq_len, batch, seed)
            prm = caches.prompt_scores(model.spec, run.prompt)
    except UserError as err:
        app_state.show_error(err)
        st.stop()
    st.caption(f"**{md(facts.name)}** · {facts.n_layers} layers × {facts.n_heads} heads · induction "
               f"on {batch} × [start, {seq_len} random tokens, the same {seq_len} again] "
               f"(seed {seed}) · other scores on {run.n_tokens} prompt tokens")
    if not facts.causal:
        st.info("This encoder has no causal mask: a head can read the next token directly, so "
                "the induction score (attention to the token after the earlier copy) reads "
                "differently here than in a decoder.")
    if not prm.has_duplicates and source == "prompt":
        st.caption("No token repeats in your prompt, so its duplicate-token score is blank.")
    flags = flag_grids(rep, prm, thresholds, source)
    c = st.columns(len(SCORES))
    for col, (name, label) in zip(c, SCORES.items()):
        col.metric(f"{label} heads", f"{int(flags[name].sum())} / {facts.n_total_heads}")
    st.caption(f"Sink rate (Gu et al. 2024, alpha on the first token > {thresholds.sink:g}): "
               f"**{scores.rate(flags['sink']):.1%}** of heads, on this one prompt.")
    show_grids(rep, prm, flags, source, run, thresholds.sink)
    imp = show_pruning(model, run)
    st.subheader("All heads")
    table = head_table(rep, prm, thresholds, imp, run.tokens, extras=True, source=source)
    table["open"] = [app_state.explorer_link(int(l), int(h)) for l, h in
                     zip(table["layer"], table["head"])]
    numbers = {c: st.column_config.NumberColumn(
        COLUMN_LABELS.get(c, c), help=COLUMN_HELP.get(c),
        format="%.4g" if c in ABLATION_COLUMNS else "%.3f")
        for c in table.columns if table[c].dtype.kind == "f"}
    words = {c: st.column_config.Column(COLUMN_LABELS.get(c, c), help=COLUMN_HELP.get(c))
             for c in table.columns if table[c].dtype.kind != "f"}
    st.dataframe(table, hide_index=True, width="stretch", column_order=[
        "L.H", "open", "flags", *SCORES, "sink_flag", "top_sink_token", "top_sink_alpha",
        "previous_token_repeated", "duplicate_token_repeated", "current_token_repeated",
        *(ABLATION_COLUMNS if imp is not None else [])],
        column_config={**words, **numbers, "open": st.column_config.LinkColumn(
            "explorer", display_text="open ↗")})
    st.download_button("Download all scores (CSV)", table_csv(table.drop(columns="open")),
                       file_name="head_scores.csv", mime="text/csv")
