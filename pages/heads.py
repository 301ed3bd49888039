"""Head finder: which heads do what over a corpus, and which can go."""

import streamlit as st

import app_state
from models.errors import UserError
from models.heads.work import pass_cost, seconds_for
from models.heads.corpus_scores import score_corpus
from models.heads.table import corpus_flag_grids, corpus_table, table_csv
from models.model.forward import tokenize
from pages import _heads_prune as prune
from pages import _heads_sections as sections
from ui import caches, job_view
from ui.text import md

app_state.page_title("Head finder")
st.caption("What each attention head does, measured over many texts: each score is a mean "
           "over the corpus with its spread, a head is flagged only when the score holds up "
           "across texts, and heads that matter little can be pruned into a smaller checkpoint.")
model, run = app_state.model_and_run()
if run is None:
    st.stop()
facts = run.facts
corpus, cap = sections.corpus_picker(model, run)
seq_len, batch, seed, thresholds = sections.settings(facts)
if corpus is None:
    st.stop()
try:
    with st.spinner("Scoring every head on repeated random tokens…"):
        rep = caches.repeated_scores(model.spec, seq_len, batch, seed)
    n_tokens = sum(int(tokenize(model, text, cap)[0].shape[1]) for text in corpus.texts)
    scores = job_view.run_job(
        ("corpus_scores", model.spec, corpus.key, cap), "Scoring every head on the corpus",
        lambda p: score_corpus(model, corpus.texts, cap, p),
        estimate_s=1.5 * seconds_for(model, pass_cost(model, n_tokens)))
except UserError as err:
    app_state.show_error(err)
    st.stop()
if scores is job_view.MISSING:
    st.stop()

st.caption(f"**{md(facts.name)}** · {facts.n_layers} layers × {facts.n_heads} heads · induction on "
           f"{batch} × [start, {seq_len} random tokens, the same {seq_len} again] (seed {seed})"
           f" · other scores on {scores.n_texts} texts, {scores.n_tokens:,} tokens"
           + (f" ({scores.n_cut} cut to {cap} tokens)" if scores.n_cut else ""))
if not facts.causal:
    st.info("This encoder has no causal mask: a head can read the next token directly, so the "
            "induction score (attention to the token after the earlier copy) reads differently "
            "here than in a decoder.")
flags = corpus_flag_grids(rep, scores, thresholds)
sections.show_counts(flags, facts.n_total_heads, thresholds.sink, scores.n_texts)
sections.show_grids(rep, scores, flags)
table_area = st.container()
sections.top_examples(model, corpus, scores)

measured, order = None, None
try:
    measured = prune.measure(model, corpus, cap)
    if measured is not None:
        order = prune.show_importance(model, corpus, measured)
except UserError as err:
    app_state.show_error(err)

with table_area:
    st.subheader("All heads")
    table = corpus_table(rep, scores, thresholds, measured[0] if measured else None)
    table["open"] = [app_state.explorer_link(int(l), int(h))
                     for l, h in zip(table["layer"], table["head"])]
    sections.show_table(table, measured is not None)
    csv = table.drop(columns=["open"] + [c for c in table if c.endswith("_spread")])
    st.download_button("Download all scores (CSV)", table_csv(csv), file_name="head_scores.csv",
                       mime="text/csv")

if measured is not None and order is not None:
    try:
        prune.export(model, measured, order)
    except UserError as err:
        app_state.show_error(err)
