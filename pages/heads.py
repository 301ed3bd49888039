"""Head finder: which heads do what over a corpus, and which can go."""

import streamlit as st

from models.errors import UserError
from models.head import Head
from models.heads.table import corpus_flag_grids, corpus_table, table_csv
from models.model.variants.layers import sink_logit_grid
from ui import session
from ui.sections import heads, prune
from ui.widgets import job_view

session.page_title("Head finder")
st.caption(
    "What each attention head does, measured over many texts: each score is a mean "
    "over the corpus with its spread, a head is flagged only when the score holds up "
    "across texts, and heads that matter little can be pruned into a smaller checkpoint."
)
model = session.active_model()
if model is None:
    st.stop()
facts = model.facts
try:
    corpus, cap = heads.corpus_picker(model, session.current_prompt())
    seq_len, batch, seed, thresholds = heads.settings(facts.n_ctx)
    heads.link()
    if corpus is None:
        st.stop()
    rep, scores = heads.measure(model, corpus, cap, seq_len, batch, seed)
except UserError as err:
    session.show_error(err)
    st.stop()
if rep is job_view.MISSING or scores is job_view.MISSING:
    st.stop()

st.caption(
    f"**{facts.name}** · {facts.n_layers} layers × {facts.n_heads} heads · induction on "
    f"{batch} × [start, {seq_len} random tokens, the same {seq_len} again] (seed {seed})"
    f" · other scores on {scores.n_texts} text{'s' if scores.n_texts != 1 else ''}, "
    f"{scores.n_tokens:,} tokens"
    + (f" ({scores.n_cut} cut to {cap} tokens)" if scores.n_cut else "")
)
if not facts.causal:
    st.info(
        "This encoder has no causal mask: a head can read the next token directly, so the "
        "induction score (attention to the token after the earlier copy) reads differently "
        "here than in a decoder."
    )
flags = corpus_flag_grids(rep, scores, thresholds)
heads.show_counts(flags, facts.n_total_heads, thresholds.sink, scores.n_texts)
heads.show_grids(rep, scores, flags)
table_area = st.container()
heads.top_examples(corpus, scores)

measured, order = None, None
try:
    measured = prune.measure(model, corpus, cap)
    if measured is not None:
        order = prune.show_importance(model, corpus, measured)
except UserError as err:
    session.show_error(err)

with table_area:
    st.subheader("All heads")
    table = corpus_table(
        rep,
        scores,
        thresholds,
        measured.importance if measured else None,
        sink_logit_grid(model),
    )
    table["open"] = [
        session.explorer_link(Head(int(layer), int(h)))
        for layer, h in zip(table["layer"], table["head"], strict=True)
    ]
    heads.show_table(table, measured is not None)
    csv = table.drop(columns=["open"] + [c for c in table if c.endswith("_spread")])
    st.download_button(
        "Download all scores (CSV)", table_csv(csv), file_name="head_scores.csv", mime="text/csv"
    )

if measured is not None and order is not None:
    try:
        prune.export(model, measured, order)
    except UserError as err:
        session.show_error(err)
