"""Head finder sections on pruning: importance over the corpus, the pruning curve, and the pruned
checkpoint with its report and download (layout only; the computation is in models/heads)."""

from __future__ import annotations

import numpy as np
import streamlit as st

import app_state
from models.errors import UserError
from models.heads import corpus_ablation as ca
from models.heads import work
from models.heads.ablation import check_hooks, pruning_order
from models.heads.corpus import Corpus
from models.heads.export import export_dir, prune_and_export, zip_directory
from models.heads.loss import loss_kind
from models.heads.names import COLUMN_LABELS, CORPUS_ABLATION
from models.heads.prune import PruneError, family, uniform_group_heads
from models.heads.table import corpus_prune_list, prune_list_json
from ui import job_view
from viz.heads_figures import pruning_curve
from viz.heatmap import score_grid

RANKINGS = {"zero": "Zero-ablation loss change (measured)",
            "mean": "Mean-ablation loss change (measured)",
            "first_order": "Zero-ablation, first-order estimate (fast)",
            "gradient": "Gradient |dL/dξ| (Michel et al.; fast)"}
K_EXPORT = "heads_export_request"


def _start(key: str, value):
    return st.session_state.setdefault(key, value)


def measure(model, corpus: Corpus, cap: int):
    """Importance over the corpus as a job; returns ``(importance, tasks, ranking, method,
    job key)`` or None (not available, switched off, or still running)."""
    st.subheader("Pruning importance")
    try:
        loss_kind(model)
        check_hooks(model)
    except UserError as err:
        app_state.show_error(err)
        return None
    big = model.facts.n_total_heads > 48
    c = st.columns(3)
    _start("heads_ranking", "first_order" if big else "zero")
    ranking = c[0].selectbox("Rank heads by", list(RANKINGS), format_func=RANKINGS.get,
                             key="heads_ranking",
                             help="Measured: one forward pass per head over the corpus tokens "
                                  "(exact, slow on a large model). Fast: one forward and one "
                                  "backward pass per text (an estimate).")
    method = c[1].radio("Prune by", ["zero", "mean"], key="heads_method", horizontal=True,
                        format_func=lambda m: f"{m}-ablation")
    _start("heads_budget", work.default_budget(model))
    budget = c[2].number_input("Corpus tokens to ablate on", 16, 1_000_000, key="heads_budget",
                               help="The first texts of the corpus up to this many tokens: "
                                    "each head costs one forward pass over them.")
    tasks = work.budget_tasks(model, corpus.texts, int(budget), cap)
    sizes = [int(t.ids.shape[1]) for t in tasks]
    methods = tuple(sorted({"gradient"} | ({ranking} & {"zero", "mean"})))
    seconds = work.seconds_for(model, ca.importance_work(model, sizes, methods))
    _start("heads_ablate", not big)
    if not st.toggle(f"Measure it: {len(tasks)} texts, {sum(sizes)} tokens, "
                     f"{' + '.join(methods)} (first guess {seconds:.0f} s)", key="heads_ablate"):
        return None
    key = ("importance", model.spec, corpus.key, int(budget), cap, methods)
    imp = job_view.run_job(key, "Ablating every head over the corpus",
                           lambda p: ca.measure_corpus_importance(model, tasks, methods, p),
                           estimate_s=seconds)
    if imp is job_view.MISSING:
        return None
    return imp, tasks, ranking, method, key


def show_importance(model, corpus: Corpus, measured) -> list[tuple[int, int]] | None:
    """Grid, curve and prune list; returns the pruning order."""
    imp, tasks, ranking, method, key = measured
    order = pruning_order(imp.ranking(ranking))
    ks = ca.curve_points(len(order))
    units = sum(ca.plan_cost(model, [order[:k] for k in ks], int(t.ids.shape[1])) for t in tasks)

    def work_curve(progress):
        means = imp.means
        if method == "mean" and means is None:
            means = ca.corpus_means(model, tasks)
        return ca.pruning_curve(model, tasks, order, method, means, progress)

    curve = job_view.run_job(key + ("curve", ranking, method), "Pruning curve", work_curve,
                             estimate_s=work.seconds_for(model, units))
    kind = "next-token" if imp.kind == "next_token" else "masked-token"
    st.caption(f"{kind} cross-entropy, mean over {imp.n_texts} texts ({imp.n_targets} scored "
               f"tokens); clean loss {imp.base_loss:.4f}. Each point of the curve ablates all k "
               "heads together in one pass per text.")
    left, right = st.columns(2)
    values = imp.ranking(ranking)
    top = float(np.nanmax(np.abs(values))) or 1.0
    left.plotly_chart(score_grid(values, title=COLUMN_LABELS[CORPUS_ABLATION[ranking]],
                                 zmin=0.0 if ranking == "gradient" else -top, zmax=top,
                                 colorscale="Magma" if ranking == "gradient" else "RdBu_r"),
                      width="stretch")
    if curve is job_view.MISSING:
        return order
    right.plotly_chart(pruning_curve(curve[1], order, ks=curve[0], loss_name=f"{kind} loss",
                                     title=f"Loss with the k least important heads "
                                           f"{method}-ablated"), width="stretch")
    plan = corpus_prune_list(imp, ranking, method, order, curve[0], curve[1],
                             model.facts.name, corpus.name)
    st.download_button("Download the prune list (JSON)", prune_list_json(plan),
                       file_name="prune_list.json", mime="application/json")
    return order


def choose_heads(model, order, fam: str, values) -> list[tuple[int, int]]:
    n_total = model.facts.n_total_heads
    modes = {"least": "The k least important", "hand": "Hand-picked"}
    if fam == "llama" and model.facts.n_kv_heads > 1:
        modes["groups"] = "Whole key/value groups, the same number in every layer"
    mode = st.radio("Which heads", list(modes), format_func=modes.get, key="heads_prune_mode",
                    horizontal=True)
    if mode == "least":
        _start("heads_prune_k", max(1, n_total // 10))
        k = st.slider("How many heads (k)", 1, n_total - 1, key="heads_prune_k")
        return list(order[:k])
    if mode == "groups":
        r = st.slider("Groups removed per layer", 1, model.facts.n_kv_heads - 1,
                      key="heads_prune_groups")
        return uniform_group_heads(values, model.facts.n_kv_heads, r)
    names = [f"{l}.{h}" for l, h in np.ndindex(model.facts.n_layers, model.facts.n_heads)]
    picked = st.multiselect("Heads to prune", names, key="heads_prune_pick")
    return [tuple(int(x) for x in name.split(".")) for name in picked]


def export(model, measured, order) -> None:
    st.subheader("Prune and export")
    try:
        fam = family(model.bridge.original_model)
    except PruneError as err:
        app_state.show_error(err)
        return
    if fam == "llama":
        st.caption("A key/value group whose every query head is pruned is cut out of the "
                   "weights when the same number of groups goes in every layer (a stock "
                   "checkpoint holds one head count for all layers); every other pruned head is "
                   "masked: its columns of the output projection set to zero. Both compute "
                   "exactly what zero-ablating the heads computes.")
    else:
        st.caption("This architecture derives the head size from the model width, so a stock "
                   "checkpoint cannot hold fewer heads: pruned heads are masked, their rows of "
                   "the output projection set to zero with the bias kept, which computes "
                   "exactly what zero-ablating them computes. The report counts the weights "
                   "they leave unused.")
    imp, tasks, ranking = measured[0], measured[1], measured[2]
    heads = choose_heads(model, order, fam, imp.ranking(ranking))
    if not heads:
        st.info("Pick at least one head.")
        return
    target = export_dir(model.spec, heads)
    key = ("prune", model.spec, tuple(sorted(heads)), measured[4])
    st.button(f"Build the pruned checkpoint ({len(heads)} heads)", key="heads_export",
              on_click=st.session_state.__setitem__, args=(K_EXPORT, key))
    if st.session_state.get(K_EXPORT) != key:
        return
    report = job_view.run_job(key, "Pruning, writing and timing the checkpoint",
                              lambda p: prune_and_export(model.spec, heads, target, tasks, p),
                              estimate_s=5 + 12 * work.seconds_for(
                                  model, sum(work.pass_cost(model, int(t.ids.shape[1]))
                                             for t in tasks)))
    if report is job_view.MISSING:
        return
    show_report(report)


def show_report(report) -> None:
    st.write(report.plan.describe())
    c = st.columns(3)
    if report.loss_before is not None:
        c[0].metric("Loss on the corpus", f"{report.loss_after:.4f}",
                    f"{report.loss_after - report.loss_before:+.4f} from {report.loss_before:.4f}",
                    delta_color="inverse", help="Mean over the texts of each text's loss")
    c[1].metric("Parameters stored", f"{report.params_after:,}",
                f"{report.params_after - report.params_before:+,} from {report.params_before:,}",
                delta_color="inverse", help=f"In use, masked heads left out: "
                                            f"{report.params_effective:,}")
    c[2].metric("Forward-pass time, after / before", f"{report.time_ratio:.3f}",
                help=f"{report.seconds_before * 1e3:.0f} ms before, "
                     f"{report.seconds_after * 1e3:.0f} ms after: median of alternating rounds")
    st.caption(f"Written to `{report.directory}`: choose *Local directory* in the sidebar and "
               "paste this path to load it, or load it with "
               "`transformers.AutoModelForCausalLM.from_pretrained(path)`.")
    st.download_button("Download the pruned checkpoint (zip)",
                       lambda: zip_directory(report.directory).read_bytes(),
                       file_name=f"{report.directory.rsplit('/', 1)[-1]}.zip",
                       mime="application/zip", key="heads_export_zip")
