"""Head finder sections on scores: the corpus, settings, grids, the table and top examples
(layout only; the computation is in models/heads)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import app_state
from models.errors import UserError
from models.heads.corpus import Corpus, parse_upload
from models.heads.corpus_scores import EXAMPLE_SCORES, CorpusScores
from models.heads.induction import MAX_BATCH
from models.heads.names import COLUMN_HELP, COLUMN_LABELS, CORPUS_ABLATION, SCORE_LABELS
from models.heads.spread import Z
from models.heads.table import Thresholds, repeated_spread
from ui import caches
from ui.text import md
from viz.heatmap import score_grid

DEFAULTS = Thresholds()
SOURCES = {"bundled": "The bundled corpus", "prompt": "The sidebar prompt",
           "upload": "A file you upload"}


def start(key: str, value):
    """Seed a widget's value once; the widget itself is then created without a default."""
    return st.session_state.setdefault(key, value)


def clamp_start(key: str, value, low, high):
    """Seed a number widget and keep its stored value inside ``[low, high]``."""
    st.session_state[key] = min(max(start(key, value), low), high)


def corpus_picker(model, run) -> tuple[Corpus | None, int]:
    """The corpus to score on (None while an upload is missing or bad) and its token cap."""
    left, mid, right = st.columns([3, 2, 2])
    choice = left.radio("Score the heads over", list(SOURCES), format_func=SOURCES.get,
                        key="heads_corpus", horizontal=True)
    if choice == "prompt":
        corpus = Corpus("sidebar prompt", (run.prompt,), "the sidebar prompt: one text, so "
                        "no spread")
    elif choice == "bundled":
        with st.spinner("Reading the bundled corpus…"):
            corpus = caches.bundled_corpus(model.spec)
    else:
        upload = st.file_uploader("Passages: .txt (separated by blank lines) or .jsonl (one "
                                  '{"text": ...} per line), up to 5 MB', type=["txt", "jsonl"],
                                  key="heads_upload")
        if upload is None:
            st.info("Upload a file to score the heads over your own texts.")
            return None, 0
        try:
            corpus = parse_upload(upload.name, upload.getvalue())
        except UserError as err:
            app_state.show_error(err)
            return None, 0
    n_ctx = run.facts.n_ctx
    clamp_start("heads_passages", min(len(corpus.texts), 48), 1, len(corpus.texts))
    clamp_start("heads_max_tokens", min(n_ctx, 256), 8, n_ctx)
    count = mid.number_input("Texts to use", 1, len(corpus.texts), key="heads_passages",
                             disabled=len(corpus.texts) == 1)
    cap = right.number_input("Tokens per text, at most", 8, n_ctx, key="heads_max_tokens",
                             help="Longer texts are cut to this many tokens (special tokens "
                                  "included).")
    corpus = corpus.head(int(count))
    st.caption(f"Corpus: {md(corpus.source)}. Using {len(corpus.texts)} of them.")
    return corpus, int(cap)


def settings(facts) -> tuple[int, int, int, Thresholds]:
    with st.expander("Settings: repeated random tokens and flag thresholds", expanded=False):
        c = st.columns(3)
        longest = max(2, min(500, (facts.n_ctx - 2) // 2))
        clamp_start("heads_seq_len", 50, 2, longest)
        start("heads_batch", 8)
        start("heads_seed", 0)
        seq_len = c[0].number_input("Span length L", 2, longest, key="heads_seq_len")
        batch = c[1].number_input("Sequences (batch)", 2, MAX_BATCH, key="heads_batch",
                                  help="At least 2, so that the induction score has a spread.")
        seed = c[2].number_input("Seed", 0, 2**31 - 1, key="heads_seed")
        c = st.columns(5)
        for name in SCORE_LABELS:
            start(f"heads_th_{name}", getattr(DEFAULTS, name))
        th = {name: c[i].slider(f"{label} >", 0.0, 1.0, step=0.01, key=f"heads_th_{name}",
                                help=COLUMN_HELP[name])
              for i, (name, label) in enumerate(SCORE_LABELS.items())}
    return int(seq_len), max(2, int(batch)), int(seed), Thresholds(**th)


def show_counts(flags: dict, n_total: int, eps: float, n_texts: int) -> None:
    cols = st.columns(len(flags))
    for col, (name, flagged) in zip(cols, flags.items()):
        col.metric(f"{SCORE_LABELS[name]} heads", f"{int(flagged.sum())} / {n_total}",
                   help=COLUMN_HELP[name])
    st.caption(f"Sink rate (Gu et al. 2024, alpha on the first token > {eps:g}, judged on the "
               f"lower bound over {n_texts} text{'s' if n_texts > 1 else ''}): "
               f"**{float(np.mean(flags['sink'])):.1%}** of heads.")


def show_grids(rep, scores: CorpusScores, flags: dict) -> None:
    means = {"induction": repeated_spread(rep).mean,
             **{name: scores.spreads[name].mean for name in SCORE_LABELS if name != "induction"}}
    names = list(SCORE_LABELS) + ["induction_text"]
    tabs = st.tabs([COLUMN_LABELS[name] for name in names])
    for tab, name in zip(tabs, names):
        where = ("repeated random tokens" if name == "induction"
                 else f"mean over {scores.n_texts} texts")
        values = means.get(name, scores.spreads[name].mean if name in scores.spreads else None)
        tab.plotly_chart(score_grid(values, title=f"{COLUMN_LABELS[name]} ({where}; ★ flagged)",
                                    flagged=flags.get(name), zmin=0.0, zmax=1.0),
                         width="stretch")


def table_config(table: pd.DataFrame) -> dict:
    """Human headers and tooltips for every column; the flags column wide."""
    config = {}
    for column in table.columns:
        label, help_ = COLUMN_LABELS.get(column, column), COLUMN_HELP.get(column)
        if table[column].dtype.kind == "f":
            ablation = any(column.startswith(a) for a in CORPUS_ABLATION.values())
            config[column] = st.column_config.NumberColumn(
                label, help=help_, format="%.4g" if ablation else "%.3f")
        else:
            config[column] = st.column_config.Column(label, help=help_)
    config["flags"] = st.column_config.Column(COLUMN_LABELS["flags"], help=COLUMN_HELP["flags"],
                                              width="large")
    config["open"] = st.column_config.LinkColumn("Explorer", display_text="open ↗",
                                                 help="Open this head in the explorer")
    return config


def show_table(table: pd.DataFrame, has_importance: bool) -> None:
    scores = ["induction", "induction_text", "previous_token", "duplicate_token",
              "current_token", "sink"]
    ablation = list(CORPUS_ABLATION.values()) if has_importance else []
    order = ["L.H", "flags", "open"] + [c for name in scores + ablation
                                        for c in (name, f"{name}_spread")]
    order += ["top_sink_alpha", "previous_token_repeated", "duplicate_token_repeated",
              "current_token_repeated"]
    st.dataframe(table, hide_index=True, width="stretch", column_config=table_config(table),
                 column_order=[c for c in order if c in table])
    st.caption(f"Each score is a mean over the texts; *spread* gives ± its standard error and "
               f"the smallest and largest value on one text. A head is flagged when mean − "
               f"{Z:g} × SE clears the threshold. The CSV adds each score's SE, min, max and "
               f"lower bound as numbers.")


def explorer_url(model_name: str, text: str, layer: int, head: int, token: int | None) -> str:
    """A link that opens the explorer on ``text`` at ``layer.head`` (long texts by their id)."""
    return app_state.explorer_link(layer, head, token, prompt=text)


def context(tokens, query: int, key: int, width: int = 8) -> str:
    """Tokens before the query, the key in [brackets] and the query in «guillemets»; a key far
    back is shown with its neighbours, then ``…``, then the tokens before the query."""
    if query < 0:
        return "".join(tokens[:2 * width]) + " …"

    def span(low: int, high: int) -> str:
        return "".join(f"«{t}»" if i == query else f"[{t}]" if i == key else t
                       for i, t in enumerate(tokens[low:high], start=low))

    low = max(0, query - width)
    if key >= low:
        return ("… " if low else "") + span(low, query + 1)
    return (("… " if key > 2 else "") + span(max(0, key - 2), key + 3) + " … "
            + span(low, query + 1))


def top_examples(model, corpus: Corpus, scores: CorpusScores) -> None:
    st.subheader("Where a head fires")
    c = st.columns([2, 2, 3])
    name = c[0].selectbox("Score", EXAMPLE_SCORES, format_func=COLUMN_LABELS.get,
                          key="heads_example_score")
    means = scores.spreads[name].mean
    ranked = [(int(l), int(h)) for l, h in zip(*np.unravel_index(
        np.argsort(-np.nan_to_num(means, nan=-1.0), axis=None, kind="stable"), means.shape))]
    head = c[1].selectbox("Head (strongest first)", ranked, key=f"heads_example_head_{name}",
                          format_func=lambda lh: f"{lh[0]}.{lh[1]}  ({means[lh]:.2f})")
    c[2].caption(COLUMN_HELP[name])
    found = scores.examples[name].of(*head)
    if not found:
        st.info("No text in the corpus has a position this score can be measured on.")
        return
    rows = []
    for ex in found:
        tokens = scores.tokens[ex.text]
        rows.append({
            "weight": ex.value, "text": ex.text + 1,
            "query": "whole text" if ex.query < 0 else f"({ex.query}) {tokens[ex.query]}",
            "key": f"({ex.key}) {tokens[ex.key]}", "context": context(tokens, ex.query, ex.key),
            "open": explorer_url(model.spec.name, corpus.texts[ex.text], head[0], head[1],
                                 None if ex.query < 0 else ex.query)})
    help_ = {"weight": "The attention weight (for the sink: the text's alpha on token 0)",
             "text": "Which text of the corpus", "query": "The token that attends",
             "key": "The token it attends to", "context": "The tokens before the query; "
             "[key] and «query» marked"}
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", column_config={
        **{k: st.column_config.Column(k.capitalize(), help=v) for k, v in help_.items()},
        "weight": st.column_config.NumberColumn("Weight", help=help_["weight"], format="%.3f"),
        "context": st.column_config.Column("Context", help=help_["context"], width="large"),
        "open": st.column_config.LinkColumn("Explorer", display_text="open ↗",
                                            help="This text in the explorer, at this head")})
