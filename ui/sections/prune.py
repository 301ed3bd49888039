"""Head finder sections on pruning: importance over the corpus, the pruning curve, and the pruned
checkpoint with its report and download (layout only; the computation is in models.heads)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import streamlit as st

from models.errors import UserError
from models.head import Head, all_heads
from models.heads.finding.corpus import Corpus
from models.heads.names import (
    ABLATION_COLUMN,
    COLUMN_LABELS,
    RANKINGS,
    AblationMethod,
    Ranking,
)
from models.heads.pruning import importance as imp_
from models.heads.pruning.ablation import check_hooks, pruning_order
from models.heads.pruning.export import (
    PruneReport,
    export_estimate,
    prune_and_export,
    zip_directory,
)
from models.heads.pruning.loss import LossTask, budget_tasks, default_budget, loss_kind
from models.heads.pruning.prune import PruneError, family, uniform_group_heads
from models.heads.table import corpus_prune_list, prune_list_json
from models.model.handle import ModelHandle
from models.model.spec import DType
from models.model.weights import original
from ui import session
from ui.keys import Heads
from ui.runtime import job_work, server
from ui.runtime.job_keys import CurveKey, ImportanceKey, PruneKey
from ui.sections.heads import current_view, save
from ui.session_state import keep, seed_widgets
from ui.state import heads as hs
from ui.widgets import job_view
from viz.colours import SIGNED
from viz.heads_figures import pruning_curve
from viz.heatmap import score_grid

RANKING_WORDS: dict[Ranking, str] = {
    "zero": "Zero-ablation loss change (measured)",
    "mean": "Mean-ablation loss change (measured)",
    "first_order": "Zero-ablation, first-order estimate (fast)",
    "gradient": "Gradient |dL/dξ| (Michel et al.; fast)",
}
EXPORT_DTYPES: dict[DType, str] = {
    "float32": "float32 (exact)",
    "bfloat16": "bfloat16 (half the size)",
    "float16": "float16 (half the size)",
}


@dataclass(frozen=True)
class Measured:
    """Importance over the corpus and what it was measured with."""

    importance: imp_.CorpusImportance
    tasks: list[LossTask]
    ranking: Ranking
    method: AblationMethod
    key: ImportanceKey


def _importance_changed() -> None:
    ss, view = st.session_state, current_view()
    save(
        hs.with_importance(
            view,
            ss[Heads.RANKING],
            ss[Heads.METHOD],
            int(ss[Heads.BUDGET]),
            bool(ss.get(Heads.ABLATE, view.ablate)),
        )
    )


def _pruning_changed() -> None:
    ss, view = st.session_state, current_view()
    k = ss.get(Heads.PRUNE_K, view.prune_k)
    save(
        hs.with_pruning(
            view,
            ss.get(Heads.PRUNE_MODE, view.prune_mode),
            None if k is None else int(k),
            int(ss.get(Heads.PRUNE_GROUPS, view.prune_groups)),
            tuple(ss.get(Heads.PRUNE_PICK, view.prune_pick)),
            ss.get(Heads.PRUNE_DTYPE, view.prune_dtype),
        )
    )


def measure(model: ModelHandle, corpus: Corpus, cap: int) -> Measured | None:
    """Importance over the corpus as a job; None when not available, switched off, or still
    running."""
    st.subheader("Pruning importance")
    try:
        loss_kind(model)
        check_hooks(model)
    except UserError as err:
        session.show_error(err)
        return None
    n_heads = model.facts.n_total_heads
    view = current_view()
    c = st.columns([3, 2, 2])  # the rankings' names are long: "Zero-ablation, first-order …"
    seed_widgets(
        {
            Heads.RANKING: hs.shown_ranking(view, n_heads),
            Heads.METHOD: view.method,
            Heads.BUDGET: view.budget if view.budget is not None else default_budget(model),
            Heads.ABLATE: hs.shown_ablate(view, n_heads),
        }
    )
    ranking = c[0].selectbox(
        "Rank heads by",
        RANKINGS,
        format_func=RANKING_WORDS.__getitem__,
        key=Heads.RANKING,
        on_change=_importance_changed,
        help="Measured: one forward pass per head over the corpus tokens "
        "(exact, slow on a large model). Fast: one forward and one "
        "backward pass per text (an estimate).",
    )
    ablations: list[AblationMethod] = ["zero", "mean"]
    method = c[1].radio(
        "Prune by",
        ablations,
        key=Heads.METHOD,
        on_change=_importance_changed,
        horizontal=True,
        format_func=lambda m: f"{m}-ablation",
    )
    budget = c[2].number_input(
        "Corpus tokens to ablate on",
        16,
        1_000_000,
        key=Heads.BUDGET,
        on_change=_importance_changed,
        help="The first texts of the corpus up to this many tokens: "
        "each head costs one forward pass over them.",
    )
    tasks = budget_tasks(model, corpus.texts, int(budget), cap)
    sizes = [int(t.ids.shape[1]) for t in tasks]
    methods = tuple(sorted({"gradient"} | ({str(ranking)} & {"zero", "mean"})))
    estimate = imp_.importance_estimate(model, sizes, methods)
    key = ImportanceKey(session.allowed_spec(model), corpus.key, int(budget), cap, methods)
    seconds = job_view.expected_seconds(key, estimate)
    texts = "text" if len(tasks) == 1 else "texts"
    if not st.toggle(
        f"Measure it in {model.spec.dtype}: {len(tasks)} {texts}, {sum(sizes)} "
        f"tokens, {' + '.join(methods)} (about {seconds:.0f} s)",
        key=Heads.ABLATE,
        on_change=_importance_changed,
    ):
        st.caption(
            "Turn it on to rank every head by its importance, draw the pruning curve and "
            "build a pruned checkpoint."
        )
        return None
    work = "Ranking every head" if ranking in ("gradient", "first_order") else "Ablating every head"
    found = job_view.run_job(
        key,
        f"{work} over the corpus",
        lambda p: imp_.measure_corpus_importance(model, tasks, methods, p),
        cost=estimate,
    )
    if found is job_view.MISSING:
        return None
    return Measured(found, tasks, ranking, method, key)


def show_importance(model: ModelHandle, corpus: Corpus, measured: Measured) -> list[Head]:
    """Grid, curve and prune list; returns the pruning order."""
    imp = measured.importance
    order = pruning_order(imp.ranking(measured.ranking))
    ks = imp_.curve_points(len(order))
    sizes = [int(t.ids.shape[1]) for t in measured.tasks]

    curve = job_view.run_job(
        CurveKey(measured.key, measured.ranking, measured.method),
        "Pruning curve",
        lambda p: job_work.curve_of(
            model, measured.tasks, imp, measured.ranking, measured.method, p
        ),
        cost=imp_.curve_estimate(model, sizes, len(ks)),
    )
    kind = "next-token" if imp.kind == "next_token" else "masked-token"
    st.caption(
        f"{kind} cross-entropy, mean over {imp.n_texts} text"
        f"{'s' if imp.n_texts != 1 else ''} ({imp.n_targets} scored tokens); clean loss "
        f"{imp.base_loss:.4f}. Each point of the curve ablates all k heads together in "
        "one pass per text."
    )
    left, right = st.columns(2)
    values = imp.ranking(measured.ranking)
    top = float(np.nanmax(np.abs(values))) or 1.0
    gradient = measured.ranking == "gradient"
    left.plotly_chart(
        score_grid(
            values,
            title=COLUMN_LABELS[ABLATION_COLUMN[measured.ranking]],
            zmin=0.0 if gradient else -top,
            zmax=top,
            colorscale="Magma" if gradient else SIGNED,
        ),
        width="stretch",
    )
    if curve is job_view.MISSING:
        return order
    ks, losses = curve[0], [float(loss) for loss in curve[1]]
    right.plotly_chart(
        pruning_curve(
            losses,
            order,
            ks=ks,
            loss_name=f"{kind} loss",
            title=f"Loss with the k least important heads {measured.method}-ablated",
        ),
        width="stretch",
    )
    plan = corpus_prune_list(
        imp,
        measured.ranking,
        measured.method,
        order,
        ks,
        losses,
        model.facts.name,
        corpus.name,
    )
    st.download_button(
        "Download the prune list (JSON)",
        prune_list_json(plan),
        file_name="prune_list.json",
        mime="application/json",
    )
    return order


def choose_heads(model: ModelHandle, order: list[Head], fam: str, values: np.ndarray) -> list[Head]:
    facts = model.facts
    modes = {"least": "The k least important", "hand": "Hand-picked"}
    if fam == "llama" and facts.n_kv_heads > 1:
        modes["groups"] = "Whole key/value groups, the same number in every layer"
    view = save(hs.fit_pruning(current_view(), facts.n_layers, facts.n_heads, facts.n_kv_heads))
    on = _pruning_changed
    seed_widgets({Heads.PRUNE_MODE: view.prune_mode if view.prune_mode in modes else "least"})
    mode = st.radio(
        "Which heads",
        list(modes),
        format_func=modes.get,
        key=Heads.PRUNE_MODE,
        horizontal=True,
        on_change=on,
    )
    if mode == "least":
        seed_widgets({Heads.PRUNE_K: hs.shown_k(view, facts.n_total_heads)})
        k = st.slider(
            "How many heads (k)", 1, facts.n_total_heads - 1, key=Heads.PRUNE_K, on_change=on
        )
        return list(order[:k])
    if mode == "groups":
        seed_widgets({Heads.PRUNE_GROUPS: view.prune_groups})
        r = st.slider(
            "Groups removed per layer",
            1,
            facts.n_kv_heads - 1,
            key=Heads.PRUNE_GROUPS,
            on_change=on,
        )
        return [Head(*h) for h in uniform_group_heads(values, facts.n_kv_heads, r)]
    seed_widgets({Heads.PRUNE_PICK: list(view.prune_pick)})
    return list(
        st.multiselect(
            "Heads to prune",
            list(all_heads(facts.n_layers, facts.n_heads)),
            key=Heads.PRUNE_PICK,
            format_func=str,
            on_change=on,
        )
    )


def family_note(fam: str) -> None:
    if fam == "llama":
        st.caption(
            "A key/value group whose every query head is pruned is cut out of the "
            "weights when the same number of groups goes in every layer (a stock "
            "checkpoint holds one head count for all layers); every other pruned head is "
            "masked: its columns of the output projection set to zero. Both compute "
            "exactly what zero-ablating the heads computes."
        )
    else:
        st.caption(
            "This architecture derives the head size from the model width, so a stock "
            "checkpoint cannot hold fewer heads: pruned heads are masked, their rows of "
            "the output projection set to zero with the bias kept, which computes "
            "exactly what zero-ablating them computes. The report counts the weights "
            "they leave unused."
        )


def export(model: ModelHandle, measured: Measured, order: list[Head]) -> None:
    st.subheader("Prune and export")
    try:
        fam = family(original(model))
    except PruneError as err:
        session.show_error(err)
        return
    family_note(fam)
    heads = choose_heads(model, order, fam, measured.importance.ranking(measured.ranking))
    if not heads:
        st.info("Pick at least one head.")
        return
    seed_widgets({Heads.PRUNE_DTYPE: current_view().prune_dtype})
    dtype = st.radio(
        "Checkpoint dtype",
        list(EXPORT_DTYPES),
        format_func=EXPORT_DTYPES.__getitem__,
        key=Heads.PRUNE_DTYPE,
        on_change=_pruning_changed,
        horizontal=True,
        help="bfloat16 and float16 halve the download; float32 keeps every weight "
        "exactly as the model holds it.",
    )
    spec = replace(model.spec, dtype=dtype)
    key = PruneKey(measured.key, tuple(sorted(heads)), dtype)
    estimate, disk = export_estimate(model, measured.tasks, dtype)
    st.button(
        f"Build the pruned checkpoint ({len(heads)} head{'s' if len(heads) != 1 else ''},"
        f" {dtype}: about {disk / 2 / 1024**2:,.0f} MB, and as much again for its zip)",
        key=Heads.EXPORT,
        on_click=keep,
        args=(Heads.EXPORT_REQUEST, key),
    )
    if st.session_state.get(Heads.EXPORT_REQUEST) != key:
        return
    settings = server.current().settings
    root, budget = settings.cache / "pruned", settings.disk_bytes // session.DISK_SHARES
    report = job_view.run_job(
        key,
        "Pruning, writing and timing the checkpoint",
        lambda p: prune_and_export(spec, heads, root, measured.tasks, p, budget_bytes=budget),
        cost=estimate,
    )
    if report is job_view.MISSING:
        return
    show_report(report, root, budget)


def show_report(report: PruneReport, root: Path, budget: int) -> None:
    st.write(report.plan.describe())
    c = st.columns(3)
    if report.loss_before is not None and report.loss_after is not None:
        c[0].metric(
            "Loss on the corpus",
            f"{report.loss_after:.4f}",
            f"{report.loss_after - report.loss_before:+.4f} from {report.loss_before:.4f}",
            delta_color="inverse",
            help="Mean over the texts of each text's loss",
        )
    removed = report.params_before - report.params_after
    c[1].metric(
        "Parameters stored",
        f"{report.params_after:,}",
        f"{-removed:+,} from {report.params_before:,}"
        if removed
        else "none removed: the heads are masked",
        delta_color="inverse" if removed else "off",
        delta_arrow="auto" if removed else "off",
        help=f"In use, masked heads left out: {report.params_effective:,}",
    )
    c[2].metric(
        "Forward-pass time, after / before",
        f"{report.time_ratio:.3f}",
        help=f"{report.seconds_before * 1e3:.0f} ms before, "
        f"{report.seconds_after * 1e3:.0f} ms after: median of alternating rounds",
    )
    st.caption(
        "Download the zip, unpack it, and load the folder with *Local directory* in the "
        "sidebar of your own server, or with "
        "`transformers.AutoModelForCausalLM.from_pretrained(folder)`. This server keeps "
        "recent checkpoints for a while; the oldest go first when its disk budget fills."
    )
    st.download_button(
        "Download the pruned checkpoint (zip)",
        lambda: zip_directory(root / report.name, budget_bytes=budget).read_bytes(),
        file_name=f"{report.name}.zip",
        mime="application/zip",
        key=Heads.EXPORT_ZIP,
    )
