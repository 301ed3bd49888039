"""Head finder sections on scores: the corpus, settings, the work as jobs, grids, the table and
top examples (layout only; the computation is in models.heads)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from models.cost import Cost
from models.errors import UserError
from models.head import Head
from models.heads.finding.corpus import Corpus, default_corpus, parse_upload
from models.heads.finding.corpus_scores import (
    EXAMPLE_SCORES,
    CorpusScores,
    score_corpus,
    score_estimate,
)
from models.heads.finding.induction import MAX_BATCH, measure_repeated, repeated_estimate
from models.heads.finding.spread import Z
from models.heads.names import ABLATION_COLUMN, COLUMN_HELP, COLUMN_LABELS, SCORE_LABELS
from models.heads.table import Thresholds, repeated_spread
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Heads
from ui.runtime.job_keys import CorpusKey, CorpusScoresKey, RepeatedKey
from ui.text import md
from ui.widgets import job_view
from viz.heatmap import score_grid

DEFAULTS = Thresholds()
CORPUS_READ_S = 2.0  # the bundled model reads its held-out split of the standard library
SOURCES = {
    "bundled": "The bundled corpus",
    "prompt": "The sidebar prompt",
    "upload": "A file you upload",
}


def start(key: str, value: Any) -> Any:
    """Seed a widget's value once; the widget itself is then created without a default."""
    return st.session_state.setdefault(key, value)


def clamp_start(key: str, value: int, low: int, high: int) -> None:
    """Seed a number widget and keep its stored value inside ``[low, high]``."""
    st.session_state[key] = min(max(start(key, value), low), high)


def bundled_corpus(model: ModelHandle) -> Any:
    """The model's bundled corpus (the bundled model's held-out split reads the standard
    library once: a few seconds), as a light job."""
    return job_view.run_job(
        CorpusKey(session.allowed_spec(model)),
        "Reading the bundled corpus",
        lambda progress: default_corpus(model),
        cost=Cost(overhead_s=CORPUS_READ_S),
    )


def corpus_picker(model: ModelHandle, prompt: str) -> tuple[Corpus | None, int]:
    """The corpus to score on (None while an upload is missing, bad or still read) and its
    token cap."""
    left, mid, right = st.columns([3, 2, 2])
    choice = left.radio(
        "Score the heads over",
        list(SOURCES),
        format_func=SOURCES.get,
        key=Heads.CORPUS,
        horizontal=True,
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
        corpus = bundled_corpus(model)
        if corpus is job_view.MISSING:
            return None, 0
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
    clamp_start(Heads.TEXTS, min(len(corpus.texts), 48), 1, len(corpus.texts))
    clamp_start(Heads.MAX_TOKENS, min(n_ctx, 256), 8, n_ctx)
    count = mid.number_input(
        "Texts to use", 1, len(corpus.texts), key=Heads.TEXTS, disabled=len(corpus.texts) == 1
    )
    cap = right.number_input(
        "Tokens per text, at most",
        8,
        n_ctx,
        key=Heads.MAX_TOKENS,
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
        longest = max(2, min(500, (n_ctx - 2) // 2))
        clamp_start(Heads.SPAN, 50, 2, longest)
        start(Heads.BATCH, 8)
        start(Heads.SEED, 0)
        seq_len = c[0].number_input("Span length L", 2, longest, key=Heads.SPAN)
        batch = c[1].number_input(
            "Sequences (batch)",
            2,
            MAX_BATCH,
            key=Heads.BATCH,
            help="At least 2, so that the induction score has a spread.",
        )
        seed = c[2].number_input("Seed", 0, 2**31 - 1, key=Heads.SEED)
        sliders = st.columns(5)
        for name in SCORE_LABELS:
            start(Heads.threshold(name), getattr(DEFAULTS, name))
        th = {
            name: sliders[i].slider(
                f"{label} >", 0.0, 1.0, step=0.01, key=Heads.threshold(name), help=COLUMN_HELP[name]
            )
            for i, (name, label) in enumerate(SCORE_LABELS.items())
        }
    return int(seq_len), max(2, int(batch)), int(seed), Thresholds(**th)


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
    config["flags"] = st.column_config.Column(
        COLUMN_LABELS["flags"], help=COLUMN_HELP["flags"], width="large"
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
    order = ["L.H", "flags", "open"] + [
        c for name in scores + ablation for c in (name, f"{name}_spread")
    ]
    order += [
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


def context(tokens: tuple[str, ...], query: int, key: int, width: int = 8) -> str:
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
    name = c[0].selectbox(
        "Score", EXAMPLE_SCORES, format_func=COLUMN_LABELS.__getitem__, key=Heads.EXAMPLE_SCORE
    )
    means = scores.spreads[name].mean
    order = np.argsort(-np.nan_to_num(means, nan=-1.0), axis=None, kind="stable")
    ranked = [
        Head(int(layer), int(h))
        for layer, h in zip(*np.unravel_index(order, means.shape), strict=True)
    ]
    head = c[1].selectbox(
        "Head (strongest first)",
        ranked,
        key=Heads.example_head(name),
        format_func=lambda h: f"{h}  ({means[h]:.2f})",
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
            {
                "weight": ex.value,
                "text": ex.text + 1,
                "query": "whole text" if ex.query < 0 else f"({ex.query}) {tokens[ex.query]}",
                "key": f"({ex.key}) {tokens[ex.key]}",
                "context": context(tokens, ex.query, ex.key),
                "open": session.explorer_link(
                    head, None if ex.query < 0 else ex.query, prompt=corpus.texts[ex.text]
                ),
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
            **{k: st.column_config.Column(k.capitalize(), help=v) for k, v in help_.items()},
            "weight": st.column_config.NumberColumn("Weight", help=help_["weight"], format="%.3f"),
            "context": st.column_config.Column("Context", help=help_["context"], width="large"),
            "open": st.column_config.LinkColumn(
                "Explorer", display_text="open ↗", help="This text in the explorer, at this head"
            ),
        },
    )
