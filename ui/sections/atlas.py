"""Head atlas: the corpus, the atlas as a kept job, the axes from the link, the scatter, a
second model beside the first, and the downloads."""

from __future__ import annotations

import hashlib
from typing import Any

import streamlit as st

from models.errors import UserError
from models.head import Head
from models.heads.atlas.compute import (
    Atlas,
    atlas_estimate,
    compute_atlas,
    with_dla,
    with_importance,
)
from models.heads.atlas.export import atlas_table, atlas_zip
from models.heads.atlas.metrics import METRIC_NAMES, METRICS
from models.heads.finding.corpus import Corpus
from models.heads.pruning.ablation import check_hooks
from models.heads.pruning.importance import importance_estimate, measure_corpus_importance
from models.heads.pruning.loss import budget_tasks, loss_kind
from models.heads.table import table_csv
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from models.model.spec import ModelSpec
from ui import session
from ui.keys import Circuits, HeadAtlas
from ui.runtime import server
from ui.runtime.job_keys import AtlasKey, CircuitKey, ImportanceKey
from ui.runtime.policy import admit
from ui.sections.heads import bundled_corpus
from ui.session_state import keep, seed_widgets
from ui.state.atlas import (
    MIN_TOKENS,
    AtlasView,
    axis_label,
    clamp,
    fit_corpus,
    noted,
    select,
    with_axes,
    with_max_tokens,
    with_texts,
)
from ui.state.circuits import CircuitsState
from ui.text import md
from ui.widgets import components, job_view
from ui.widgets.job_view import Pending
from viz.atlas_figures import atlas_scatter, head_pictures, shared_ranges

OPTIONAL = (None, *METRIC_NAMES)
BUDGET_ALL = 10**9  # the ablation reads every token of the atlas's texts


def stored_view() -> AtlasView:
    """The session's view, or the one its link asked for."""
    return session.stored_view(HeadAtlas.VIEW, "atlas", AtlasView)


def corpus_choice(model: ModelHandle) -> tuple[Corpus | None, int]:
    """The model's bundled corpus cut to the visitor's number of texts and tokens."""
    corpus = bundled_corpus(model)
    if corpus is job_view.MISSING:
        return None, 0
    left, right = st.columns(2)
    view = fit_corpus(stored_view(), len(corpus.texts), model.facts.n_ctx)
    keep(HeadAtlas.VIEW, view)
    count = left.number_input(
        "Texts",
        1,
        len(corpus.texts),
        **session.bound(HeadAtlas.VIEW, HeadAtlas.TEXTS, view.texts, with_texts),
    )
    cap = right.number_input(
        "Tokens per text, at most",
        MIN_TOKENS,
        model.facts.n_ctx,
        **session.bound(HeadAtlas.VIEW, HeadAtlas.MAX_TOKENS, view.max_tokens, with_max_tokens),
    )
    corpus = corpus.head(int(count))
    st.caption(f"Corpus: {md(corpus.source)}. Using {len(corpus.texts)} of them.")
    return corpus, int(cap)


def measure(model: ModelHandle, corpus: Corpus, cap: int) -> Atlas | Pending:
    """The model's atlas on ``corpus`` as a kept job (:data:`job_view.MISSING` while it runs)."""
    sizes = [int(tokenize(model, text, cap)[0].shape[1]) for text in corpus.texts]
    key = AtlasKey(session.allowed_spec(model), corpus.key, cap)
    label = f"Measure every head on {len(sizes)} texts ({sum(sizes):,} tokens"
    if not job_view.start_button(key, label, atlas_estimate(model, sizes), HeadAtlas.START):
        return job_view.MISSING
    return job_view.run_job(
        key,
        f"Measuring every head of {model.facts.name} on {len(sizes)} texts "
        f"({sum(sizes):,} tokens): scores, weights, peaks and principal components",
        lambda progress: compute_atlas(model, corpus, cap, progress=progress),
        cost=atlas_estimate(model, sizes),
    )


def ablation(model: ModelHandle, corpus: Corpus, cap: int, atlas: Atlas) -> Atlas:
    """The atlas with each head's causal importance once the visitor asks for it: zero- and
    mean-ablation over the atlas's own texts, the Head finder's job (the same corpus, tokens
    and methods share one kept result)."""
    try:
        loss_kind(model)
        check_hooks(model)
    except UserError as err:
        st.caption(f"Ablation importance: {md(err)}")
        return atlas
    tasks = budget_tasks(model, corpus.texts, BUDGET_ALL, cap)
    sizes = [int(t.ids.shape[1]) for t in tasks]
    methods = ("gradient", "mean", "zero")
    estimate = importance_estimate(model, sizes, methods)
    key = ImportanceKey(session.allowed_spec(model), corpus.key, BUDGET_ALL, cap, methods)
    label = "Measure each head's ablation importance on these texts (one pass per head and text"
    if not job_view.start_button(key, label, estimate, HeadAtlas.ABLATE, primary=False):
        return atlas
    found = job_view.run_job(
        key,
        "Ablating every head over the atlas's texts",
        lambda progress: measure_corpus_importance(model, tasks, methods, progress),
        cost=estimate,
    )
    return atlas if found is job_view.MISSING else with_importance(atlas, found)


def direct_logit(model: ModelHandle, atlas: Atlas) -> Atlas:
    """The atlas with each head's direct logit attribution from the task this session ran on
    the Circuits page for this model, when its runs are held; else it says where to get it."""
    state = st.session_state.get(Circuits.STATE)  # read only: the Circuits page owns it
    spec = session.allowed_spec(model)
    if isinstance(state, CircuitsState) and state.model == spec:
        base = server.current().results.get(CircuitKey(spec, state.task))
        if base is not None:
            task = f"the Circuits task “{md(state.task.answer)}” vs “{md(state.task.wrong)}”"
            return with_dla(atlas, base.attribution.heads, task)
    st.caption(
        "Direct logit attribution joins the map once a task has run on the Circuits page "
        "for this model (it is measured on that task's prompt)."
    )
    return atlas


def current_view(atlas: Atlas) -> AtlasView:
    """The page's view: from the link the first time (its notes shown once), then as the
    visitor changes it."""
    view = stored_view()
    if not view.notes_shown:
        for note in session.link_notes("atlas"):
            st.caption(md(note))
        view = noted(view)
    view, notes = clamp(view, atlas.facts.n_layers, atlas.facts.n_heads)
    for note in notes:
        st.caption(md(note))
    keep(HeadAtlas.VIEW, view)
    return view


def _axes_changed() -> None:
    ss = st.session_state
    keep(
        HeadAtlas.VIEW,
        with_axes(
            ss[HeadAtlas.VIEW],
            ss[HeadAtlas.X],
            ss[HeadAtlas.Y],
            ss[HeadAtlas.COLOUR],
            ss[HeadAtlas.SIZE],
        ),
    )


def axes(view: AtlasView) -> None:
    """Four pickers: x, y, colour and size (the view's values)."""
    pickers = [
        (HeadAtlas.X, "x", METRIC_NAMES, view.x),
        (HeadAtlas.Y, "y", METRIC_NAMES, view.y),
        (HeadAtlas.COLOUR, "Colour", OPTIONAL, view.colour),
        (HeadAtlas.SIZE, "Size", OPTIONAL, view.size),
    ]
    for column, (key, label, options, value) in zip(st.columns(4), pickers, strict=True):
        seed_widgets({key: value})
        column.selectbox(label, options, format_func=axis_label, key=key, on_change=_axes_changed)


def _labels() -> dict[str, str]:
    return {name: axis_label(name) for name in METRICS}


def scatter(atlas: Atlas, view: AtlasView, key: str, ranges: Any = None) -> None:
    """The atlas scatter; a click on a head opens its card."""
    x, y, colour, size = view.columns()
    fig = atlas_scatter(
        atlas_table(atlas),
        x,
        y,
        colour,
        size,
        labels=_labels(),
        title=f"{atlas.facts.name}: {atlas.facts.n_total_heads} heads on {atlas.corpus}",
        ranges=ranges,
        selected=str(view.head) if view.head else None,
    )
    st.plotly_chart(
        fig,
        key=key,
        on_select=lambda: _picked(key),
        selection_mode="points",
        width="stretch",
    )
    pictures(atlas, key)


def pictures(atlas: Atlas, chart: str) -> None:
    """Each head's picture beside the pointer on the map ``chart``; sent only when the browser
    does not hold this atlas's pictures yet."""
    sent = dict(st.session_state.get(HeadAtlas.PICTURES_SENT, {}))
    digest = hashlib.blake2b(atlas.pictures.tobytes(), digest_size=8).hexdigest()
    map_id = f"{chart}:{atlas.facts.name}:{digest}"
    tokens = len(atlas.tokens[atlas.pictured]) if atlas.tokens else 0
    components.map_pictures(
        head_pictures(atlas.pictures) if sent.get(chart) != map_id else None,
        map_id,
        chart,
        f"its pattern on text {atlas.pictured + 1} ({tokens} tokens), max-pooled",
        HeadAtlas.PICTURES if chart == HeadAtlas.MAP else HeadAtlas.SECOND_PICTURES,
        lambda: _pictures_missing(chart),
    )
    keep(HeadAtlas.PICTURES_SENT, {**sent, chart: map_id})


def _pictures_missing(chart: str) -> None:
    """The browser lost a map's pictures (a page drawn afresh): send them on the next run."""
    sent = dict(st.session_state.get(HeadAtlas.PICTURES_SENT, {}))
    keep(HeadAtlas.PICTURES_SENT, {**sent, chart: None})


def _picked(key: str) -> None:
    """The map's selection callback: a clicked head opens its card."""
    event = st.session_state.get(key)
    points = (event or {}).get("selection", {}).get("points", [])
    for point in points:
        if point.get("customdata") is not None:
            view = st.session_state[HeadAtlas.VIEW]
            keep(HeadAtlas.VIEW, select(view, Head.parse(point["customdata"][0])))
            return


def second_model(first: ModelHandle, corpus: Corpus, cap: int) -> Atlas | None:
    """Another model's atlas on the same corpus, or None (no name, refused, or still running)."""
    name = st.text_input(
        "Compare with another model (its atlas on the same texts, drawn on the same axes)",
        key=HeadAtlas.SECOND,
        placeholder="smollm2, minilm, a Hugging Face name or a local directory",
    ).strip()
    if not name:
        return None
    settings = server.current().settings
    allowed = admit(ModelSpec(name, device=first.spec.device, dtype=first.spec.dtype), settings)
    model = session.load(allowed)
    if model is None:
        return None
    sizes = [int(tokenize(model, text, cap)[0].shape[1]) for text in corpus.texts]
    found = job_view.run_job(
        AtlasKey(allowed, corpus.key, cap),
        f"Measuring every head of {model.facts.name} on the same {len(sizes)} texts",
        lambda progress: compute_atlas(model, corpus, cap, progress=progress),
        cost=atlas_estimate(model, sizes),
    )
    return None if found is job_view.MISSING else found


def side_by_side(first: Atlas, second: Atlas, view: AtlasView) -> None:
    """Both atlases on the same axes, so a head that moved shows where it went."""
    tables = [atlas_table(first), atlas_table(second)]
    ranges = shared_ranges(tables, view.x, view.y)
    left, right = st.columns(2)
    with left:
        scatter(first, view, HeadAtlas.MAP, ranges)
    with right:
        scatter(second, view, HeadAtlas.SECOND_MAP, ranges)


def link(view: AtlasView) -> None:
    """The page's link (model, axes, selected head) in the address bar and on the page."""
    components.sync_url(session.page_query(view), key=HeadAtlas.URL)
    st.markdown(f"[Link to this view]({session.page_url(view)})")


def downloads(atlas: Atlas) -> None:
    """The table as CSV, and every file of the atlas (cards included) as a zip; both made
    only when asked for (a model of a few thousand heads has as many cards)."""
    left, right = st.columns(2)
    left.download_button(
        "Download the atlas (CSV)",
        lambda: table_csv(atlas_table(atlas)),
        file_name="atlas.csv",
        mime="text/csv",
        key=HeadAtlas.DOWNLOAD_CSV,
    )
    right.download_button(
        "Download the atlas and every card (CSV + JSON, zip)",
        lambda: atlas_zip(atlas),
        file_name="atlas.zip",
        mime="application/zip",
        key=HeadAtlas.DOWNLOAD_ZIP,
    )
