"""Head finder sections on scores: the corpus, settings, the work as jobs, grids, the table and
top examples (layout only; the computation is in models.heads)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from models.errors import UserError
from models.head import Head
from models.heads.finding.corpus import Corpus, corpus_cost, default_corpus, parse_upload
from models.heads.finding.corpus_scores import (
    CorpusScores,
    score_corpus,
    score_estimate,
)
from models.heads.finding.induction import MAX_BATCH, measure_repeated, repeated_estimate
from models.heads.finding.spread import Z
from models.heads.names import (
    ABLATION_COLUMN,
    COLUMN_HELP,
    COLUMN_LABELS,
    EXAMPLE_SCORES,
    SCORE_LABELS,
)
from models.heads.table import Thresholds, repeated_spread
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Heads
from ui.runtime.job_keys import CorpusKey, CorpusScoresKey, RepeatedKey
from ui.session_state import keep, seed_widgets
from ui.state import heads as hs
from ui.state.heads import HeadsView
from ui.text import md
from ui.widgets import components, job_view
from viz.heatmap import score_grid

SOURCES = {
    "bundled": "The bundled corpus",
    "prompt": "The sidebar prompt",
    "upload": "A file you upload",
}


def current_view() -> HeadsView:
    """The page's view: from the link the first time, then as the visitor changes it."""
    return session.page_view(Heads.VIEW, "heads", HeadsView)


def save(view: HeadsView) -> HeadsView:
    keep(Heads.VIEW, view)
    return view


def _corpus_changed() -> None:
    ss, view = st.session_state, current_view()
    texts, cap = ss.get(Heads.TEXTS, view.texts), ss.get(Heads.MAX_TOKENS, view.max_tokens)
    save(hs.with_corpus(view, ss[Heads.CORPUS], int(texts), int(cap)))


def _repeats_changed() -> None:
    ss, view = st.session_state, current_view()
    view = hs.with_repeats(view, int(ss[Heads.SPAN]), int(ss[Heads.BATCH]), int(ss[Heads.SEED]))
    thresholds = Thresholds(**{name: float(ss[Heads.threshold(name)]) for name in SCORE_LABELS})
    save(hs.with_thresholds(view, thresholds))


def _example_changed(score_changed: bool) -> None:
    ss, view = st.session_state, current_view()
    head = None if score_changed else ss.get(Heads.EXAMPLE_HEAD)
    save(hs.choose_example(view, ss[Heads.EXAMPLE_SCORE], head))


def bundled_corpus(model: ModelHandle) -> Corpus | job_view.Pending:
    """The model's bundled corpus (the bundled model's held-out split reads the standard
    library once: a few seconds), as a light job."""
    return job_view.run_job(
        CorpusKey(session.allowed_spec(model)),
        "Reading the bundled corpus",
        lambda progress: default_corpus(model),
        cost=corpus_cost(model),
    )


def corpus_picker(model: ModelHandle, prompt: str) -> tuple[Corpus | None, int]:
    """The corpus to score on (None while an upload is missing, bad or still read) and its
    token cap."""
    left, mid, right = st.columns([3, 2, 2])
    view = current_view()
    seed_widgets({Heads.CORPUS: view.corpus})
    choice = left.radio(
        "Score the heads over",
        hs.CORPUS_SOURCES,
        format_func=SOURCES.get,
        key=Heads.CORPUS,
        horizontal=True,
        on_change=_corpus_changed,
    )
    if choice == "prompt":
        if not prompt.strip():
            st.info(
                "The prompt is empty: type one in the sidebar to score the heads on it, or "
                "choose the bundled corpus."
            )
            return None, 0
        corpus = Corpus("sidebar prompt", (prompt,), "the sidebar prompt: one text, so no spread")
    elif choice == "bundled":
        found = bundled_corpus(model)
        if found is job_view.MISSING:
            return None, 0
        corpus = found
    else:
        upload = st.file_uploader(
            "Passages: .txt (separated by blank lines) or .jsonl (one "
            '{"text": ...} per line), up to 5 MB',
            type=["txt", "jsonl"],
            key=Heads.UPLOAD,
        )
        if upload is None:
            st.info("Upload a file to score the heads over your own texts.")
            return None, 0
        try:
            corpus = parse_upload(upload.name, upload.getvalue())
        except UserError as err:
            session.show_error(err)
            return None, 0
    n_ctx = model.facts.n_ctx
    view = save(hs.fit_corpus(view, len(corpus.texts), n_ctx))
    seed_widgets({Heads.TEXTS: view.texts, Heads.MAX_TOKENS: view.max_tokens})
    count = mid.number_input(
        "Texts to use",
        1,
        len(corpus.texts),
        key=Heads.TEXTS,
        disabled=len(corpus.texts) == 1,
        on_change=_corpus_changed,
    )
    cap = right.number_input(
        "Tokens per text, at most",
        8,
        n_ctx,
        key=Heads.MAX_TOKENS,
        on_change=_corpus_changed,
        help="Longer texts are cut to this many tokens (special tokens included).",
    )
    corpus = corpus.head(int(count))
    n = len(corpus.texts)
    st.caption(
        f"Corpus: {md(corpus.source)}. Using {n} of them."
        if n > 1
        else f"Corpus: {md(corpus.source)}."
    )
    return corpus, int(cap)


def settings(n_ctx: int) -> tuple[int, int, int, Thresholds]:
    with st.expander("Settings: repeated random tokens and flag thresholds", expanded=False):
        c = st.columns(3)
        view = save(hs.fit_repeats(current_view(), n_ctx))
        seed_widgets({Heads.SPAN: view.span, Heads.BATCH: view.batch, Heads.SEED: view.seed})
        on = _repeats_changed
        c[0].number_input("Span length L", 2, hs.longest_span(n_ctx), key=Heads.SPAN, on_change=on)
        c[1].number_input(
            "Sequences (batch)",
            2,
            MAX_BATCH,
            key=Heads.BATCH,
            on_change=on,
            help="At least 2, so that the induction score has a spread.",
        )
        c[2].number_input("Seed", 0, hs.MAX_SEED, key=Heads.SEED, on_change=on)
        sliders = st.columns(5)
        for i, (name, label) in enumerate(SCORE_LABELS.items()):
            seed_widgets({Heads.threshold(name): getattr(view.thresholds, name)})
            sliders[i].slider(
                f"{label} >",
                0.0,
                1.0,
                step=0.01,
                key=Heads.threshold(name),
                on_change=on,
                help=COLUMN_HELP[name],
            )
    return view.span, view.batch, view.seed, view.thresholds


def measure(
    model: ModelHandle, corpus: Corpus, cap: int, seq_len: int, batch: int, seed: int
) -> tuple[Any, Any]:
    """Repeated-token scores and corpus scores, each a job with its estimate."""
    spec = session.allowed_spec(model)
    rep = job_view.run_job(
        RepeatedKey(spec, seq_len, batch, seed),
        f"Scoring every head on {batch} sequences of repeated random tokens",
        lambda p: measure_repeated(model, seq_len, batch, seed, progress=p),
        cost=repeated_estimate(model, seq_len, batch),
    )
    sizes = [int(tokenize(model, text, cap)[0].shape[1]) for text in corpus.texts]
    text_word = "text" if len(sizes) == 1 else "texts"
    scores = job_view.run_job(
        CorpusScoresKey(spec, corpus.key, cap),
        f"Scoring every head on {len(sizes)} {text_word} ({sum(sizes):,} tokens)",
        lambda p: score_corpus(model, corpus.texts, cap, p),
        cost=score_estimate(model, sizes),
    )
    return rep, scores


def show_counts(flags: dict[str, np.ndarray], n_total: int, eps: float, n_texts: int) -> None:
    st.caption("Heads flagged, of all heads:")
    cols = st.columns(len(flags))
    for col, (name, flagged) in zip(cols, flags.items(), strict=False):
        col.metric(
            COLUMN_LABELS[name],  # short: five side by side fit a projector's 1,280 px
            f"{int(flagged.sum())} / {n_total}",
            help=COLUMN_HELP[name],
        )
    st.caption(
        f"Sink rate (Gu et al. 2024, alpha on the first token > {eps:g}, judged on the "
        f"lower bound over {n_texts} text{'s' if n_texts > 1 else ''}): "
        f"**{float(np.mean(flags['sink'])):.1%}** of heads."
    )


def show_grids(rep: Any, scores: CorpusScores, flags: dict[str, np.ndarray]) -> None:
    means: dict[str, np.ndarray] = {
        "induction": repeated_spread(rep).mean,
        **{name: scores.spreads[name].mean for name in SCORE_LABELS if name != "induction"},
    }
    names = [*SCORE_LABELS, "induction_text"]
    tabs = st.tabs([COLUMN_LABELS[name] for name in names])
    for tab, name in zip(tabs, names, strict=True):
        where = (
            "repeated random tokens"
            if name == "induction"
            else f"mean over {scores.n_texts} text{'s' if scores.n_texts > 1 else ''}"
        )
        values = means[name] if name in means else scores.spreads[name].mean
        tab.plotly_chart(
            score_grid(
                values,
                title=f"{COLUMN_LABELS[name]} ({where}; ★ flagged)",
                flagged=flags.get(name),
                zmin=0.0,
                zmax=1.0,
            ),
            width="stretch",
        )


def table_config(table: pd.DataFrame) -> dict[str, Any]:
    """Human headers and tooltips for every column; the flags column wide."""
    config: dict[str, Any] = {}
    for column in table.columns:
        label, help_ = COLUMN_LABELS.get(column, column), COLUMN_HELP.get(column)
        if table[column].dtype.kind == "f":
            ablation = any(column.startswith(a) for a in ABLATION_COLUMN.values())
            config[column] = st.column_config.NumberColumn(
                label, help=help_, format="%.4g" if ablation else "%.3f"
            )
        else:
            config[column] = st.column_config.Column(label, help=help_)
    config["flags"] = st.column_config.Column(  # mostly empty: the scores get the width
        COLUMN_LABELS["flags"], help=COLUMN_HELP["flags"], width="medium"
    )
    config["L.H"] = st.column_config.Column(  # stays in view as the table scrolls right
        COLUMN_LABELS["L.H"], help=COLUMN_HELP["L.H"], pinned=True
    )
    config["open"] = st.column_config.LinkColumn(
        "Explorer", display_text="open ↗", help="Open this head in the explorer"
    )
    return config


def show_table(table: pd.DataFrame, has_importance: bool) -> None:
    scores = [
        "induction",
        "induction_text",
        "previous_token",
        "duplicate_token",
        "current_token",
        "sink",
    ]
    ablation = list(ABLATION_COLUMN.values()) if has_importance else []
    spread_out = ["entropy", "distance", "learned_sink", "window_edge"]
    order = ["L.H", "flags", "open"] + [
        c for name in scores + ablation + spread_out for c in (name, f"{name}_spread")
    ]
    order += [
        "sink_logit",
        "top_sink_alpha",
        "previous_token_repeated",
        "duplicate_token_repeated",
        "current_token_repeated",
    ]
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config=table_config(table),
        column_order=[c for c in order if c in table],
    )
    st.caption(
        f"Each score is a mean over the texts; *spread* gives ± its standard error and "
        f"the smallest and largest value on one text. A head is flagged when mean − "
        f"{Z:g} × SE clears the threshold. The CSV adds each score's SE, min, max and "
        f"lower bound as numbers."
    )


# The examples table's columns in pixels: at 1,280 px the "large" preset cut the context, and
# "medium" for the query and key pushed it out of view.
WIDTHS = {"open": 70, "weight": 64, "text": 44, "query": 110, "key": 104, "context": 400}


def context(tokens: tuple[str, ...], query: int, key: int, width: int = 6) -> str:
    """Tokens before the query, the key in [brackets] and the query in «guillemets»; a key far
    back is shown with its neighbours, then ``…``, then the tokens before the query."""
    if query < 0:
        return "".join(tokens[: 2 * width]) + " …"

    def span(low: int, high: int) -> str:
        return "".join(
            f"«{t}»" if i == query else f"[{t}]" if i == key else t
            for i, t in enumerate(tokens[low:high], start=low)
        )

    low = max(0, query - width)
    if key >= low:
        return ("… " if low else "") + span(low, query + 1)
    return ("… " if key > 2 else "") + span(max(0, key - 2), key + 3) + " … " + span(low, query + 1)


def top_examples(corpus: Corpus, scores: CorpusScores) -> None:
    st.subheader("Where a head fires")
    c = st.columns([2, 2, 3])
    view = current_view()
    seed_widgets({Heads.EXAMPLE_SCORE: view.example_score})
    name = c[0].selectbox(
        "Score",
        EXAMPLE_SCORES,
        format_func=COLUMN_LABELS.__getitem__,
        key=Heads.EXAMPLE_SCORE,
        on_change=_example_changed,
        args=(True,),
    )
    means = scores.spreads[name].mean
    order = np.argsort(-np.nan_to_num(means, nan=-1.0), axis=None, kind="stable")
    ranked = [
        Head(int(layer), int(h))
        for layer, h in zip(*np.unravel_index(order, means.shape), strict=True)
    ]
    seed_widgets(
        {Heads.EXAMPLE_HEAD: view.example_head if view.example_head in ranked else ranked[0]}
    )
    head = c[1].selectbox(
        "Head (strongest first)",
        ranked,
        key=Heads.EXAMPLE_HEAD,
        format_func=lambda h: f"{h}  ({means[h]:.2f})",
        on_change=_example_changed,
        args=(False,),
    )
    c[2].caption(COLUMN_HELP[name])
    found = scores.examples[name].of(*head)
    if not found:
        st.info("No text in the corpus has a position this score can be measured on.")
        return
    rows = []
    for ex in found:
        tokens = scores.tokens[ex.text]
        rows.append(
            {  # the link first: the context is wide, and the link must not scroll out of view
                "open": session.explorer_link(
                    head, None if ex.query < 0 else ex.query, prompt=corpus.texts[ex.text]
                ),
                "weight": ex.value,
                "text": ex.text + 1,
                "query": "whole text" if ex.query < 0 else f"({ex.query}) {tokens[ex.query]}",
                "key": f"({ex.key}) {tokens[ex.key]}",
                "context": context(tokens, ex.query, ex.key),
            }
        )
    help_ = {
        "weight": "The attention weight (for the sink: the text's alpha on token 0)",
        "text": "Which text of the corpus",
        "query": "The token that attends",
        "key": "The token it attends to",
        "context": "The tokens before the query; [key] and «query» marked",
    }
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        column_config={
            # in pixels, so the whole table fits 1,280 px: the context gets what the rest leave
            **{
                k: st.column_config.Column(k.capitalize(), help=v, width=WIDTHS.get(k, "small"))
                for k, v in help_.items()
            },
            "weight": st.column_config.NumberColumn(
                "Weight", help=help_["weight"], format="%.3f", width=WIDTHS["weight"]
            ),
            "context": st.column_config.Column(
                "Context", help=help_["context"], width=WIDTHS["context"]
            ),
            "open": st.column_config.LinkColumn(
                "Explorer",
                display_text="open ↗",
                help="This text in the explorer, at this head",
                width=WIDTHS["open"],
            ),
        },
    )


def link() -> None:
    """The page's link (model, corpus, settings, thresholds, ranking, pruning) in the address
    bar and on the page."""
    view = current_view()
    components.sync_url(session.page_query(view), key=Heads.URL)
    st.markdown(f"[Link to this view]({session.page_url(view)})")
