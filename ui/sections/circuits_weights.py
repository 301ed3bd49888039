"""Circuits page: what the weights say, without any prompt. Per head: the OV circuit's copying
score (its basis stated) and the QK circuit's positional preferences; between heads: Q-, K- and
V-composition (a heatmap into a chosen receiver, the top pairs); and each weight score against
its data-based twin from the head finder, with the correlation (layout only; the maths is
models.circuits.weight_circuits and models.circuits.composition).

The head finder's scores are its own jobs (:func:`ui.sections.heads.measure`, with the head
finder's default settings): a stored result is reused, else the visitor may start them here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from models.circuits import (
    Composition,
    weight_data_correlation,
)
from models.circuits.cost import weights_cost
from models.circuits.findings import WeightFindings, weight_findings
from models.errors import UserError
from models.heads.finding.corpus_scores import score_estimate
from models.heads.finding.induction import repeated_estimate
from models.heads.table import repeated_spread
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Circuits
from ui.runtime.job_keys import CorpusScoresKey, RepeatedKey
from ui.sections import heads
from ui.sections.circuits_session import apply, bound, finished, weights_key
from ui.state import circuits as cs
from ui.state import circuits_derived as derived
from ui.state.circuits import CircuitsState
from ui.widgets import job_view
from viz.circuits_figures import head_grid, weight_score_grid, weight_vs_data

SCORES = {
    "copying": "OV copying score",
    "qk_prev": "QK: previous token",
    "qk_self": "QK: the token itself",
    "qk_first": "QK: the first token",
    "qk_locality": "QK: locality",
}
TWINS = {  # pair -> (weight score, data score, data label)
    "copying_induction": ("copying", "induction", "induction score (repeated random tokens)"),
    "copying_duplicate": ("copying", "duplicate_token", "duplicate-token score (corpus)"),
    "prev_prev": ("qk_prev", "previous_token", "previous-token score (corpus)"),
}
TOP_PAIRS = 15
# The head finder's default settings (ui.sections.heads): the same keys find its results.
FINDER_TEXTS, FINDER_TOKENS, FINDER_SPAN, FINDER_BATCH, FINDER_SEED = 48, 256, 50, 8, 0


def weights(model: ModelHandle, state: CircuitsState) -> WeightFindings | None:
    """The weights job's result (started when cheap or asked), or None."""
    cost = weights_cost(model)
    key = weights_key(model)
    label = "Reading every head's weights"
    if finished(key) is None and not cs.should_run(state, "weights", cost.seconds):
        refused = job_view.refusal(key, label, cost.cost)
        if refused is not None:
            session.show_error(refused)
            return None
        st.button(
            f"Read the weights ({cost.describe()})",
            key=Circuits.RUN_WEIGHTS,
            type="primary",
            on_click=apply,
            args=(cs.ask, "weights"),
        )
        return None
    try:
        found = job_view.run_job(
            key,
            label,
            lambda p: weight_findings(model, p),
            cost=cost.cost,
        )
    except UserError as err:
        session.show_error(err)
        return None
    return None if found is job_view.MISSING else found


def per_head(found: WeightFindings, state: CircuitsState) -> None:
    scores = found.scores
    c = st.columns([1, 2])
    name = c[0].selectbox(
        "Per-head score",
        list(SCORES),
        format_func=SCORES.__getitem__,
        **bound(Circuits.WEIGHT_SCORE, state.weight_score, cs.choose_weight_score),
    )
    basis = (
        "the token basis, W_E W_V W_O W_U (tied embeddings)"
        if scores.basis == "tokens"
        else "the residual basis, W_V W_O (no tied unembedding to read tokens through)"
    )
    c[1].caption(
        f"Copying score Σλ/Σ|λ| over the OV circuit's eigenvalues, on {basis}: 1 "
        "copies every token to the logits, −1 suppresses it. QK scores: the attention "
        "an average token gives by position (previous token, itself, the first token; "
        "locality 1 = itself, 0 = no preference by distance). " + "; ".join(scores.notes) + "."
    )
    st.plotly_chart(
        weight_score_grid(getattr(scores, name), title=SCORES[name], value_name=SCORES[name]),
        width="stretch",
    )


def pairs_table(pairs: Composition, kind: str, prompt: str | None) -> pd.DataFrame:
    scores = getattr(pairs, kind)
    flat = np.where(np.isfinite(scores), scores, -np.inf)
    order = np.argsort(-flat, axis=None, kind="stable")[:TOP_PAIRS]
    rows = []
    for i in order:
        s, r = divmod(int(i), scores.shape[1])
        if not np.isfinite(flat[s, r]):
            continue
        sender, receiver = pairs.head(s), pairs.head(r)
        rows.append(
            {
                "sender": str(sender),
                "receiver": str(receiver),
                "Q": pairs.q[s, r],
                "K": pairs.k[s, r],
                "V": pairs.v[s, r],
                "open sender": session.explorer_link(sender, prompt=prompt),
                "open receiver": session.explorer_link(receiver, prompt=prompt),
            }
        )
    return pd.DataFrame(rows)


def composition_view(model: ModelHandle, found: WeightFindings, state: CircuitsState) -> None:
    pairs, facts = found.composition, model.facts
    st.markdown(
        "**Composition between heads** (Elhage et al. 2021): ‖W_OV^A W^B‖ / "
        "(‖W_OV^A‖ ‖W^B‖), W^B the receiver's W_QK (Q: A feeds its queries, K: its "
        "keys) or its W_OV (V). 0: orthogonal, 1 at most. On GQA models a query head's "
        "W_K and W_V are its key/value head's."
    )
    c = st.columns([1, 1, 3])
    kind = c[0].radio(
        "Kind",
        cs.INPUTS,
        format_func=lambda k: f"{k.upper()}-composition",
        **bound(
            Circuits.COMPOSITION,
            state.composition,
            cs.choose_composition,
        ),
    )
    receivers = [pairs.head(i) for i in range(facts.n_heads, facts.n_layers * facts.n_heads)]
    receiver = state.composition_receiver
    if receiver not in receivers:
        receiver = derived.default_composition_receiver(pairs, kind)
    receiver = c[1].selectbox(
        "Receiver",
        receivers,
        format_func=str,
        **bound(Circuits.COMPOSITION_RECEIVER, receiver, cs.choose_composition_receiver),
    )
    column = getattr(pairs, kind)[:, receiver.layer * facts.n_heads + receiver.index]
    grid = column.reshape(facts.n_layers, facts.n_heads)
    c[2].plotly_chart(
        head_grid(
            grid,
            title=f"{kind.upper()}-composition of each sender into {receiver}",
            value_name=f"{kind.upper()}-composition",
            signed=False,
        ),
        width="stretch",
    )
    st.markdown(
        f"**The {TOP_PAIRS} strongest {kind.upper()}-compositions** (the graph tab "
        "draws them as edges)"
    )
    st.dataframe(
        pairs_table(pairs, kind, None),
        hide_index=True,
        width="stretch",
        column_config={
            **{k: st.column_config.NumberColumn(format="%.3f") for k in ("Q", "K", "V")},
            "open sender": st.column_config.LinkColumn(display_text="open ↗"),
            "open receiver": st.column_config.LinkColumn(display_text="open ↗"),
        },
    )


def finder_keys(model: ModelHandle) -> tuple[Any, RepeatedKey, CorpusScoresKey | None, Any]:
    """The head finder's corpus (None while read), its keys at its default settings."""
    corpus = heads.bundled_corpus(model)
    n_ctx = model.facts.n_ctx
    span = min(FINDER_SPAN, max(2, min(500, (n_ctx - 2) // 2)))
    spec = session.allowed_spec(model)
    rep = RepeatedKey(spec, span, FINDER_BATCH, FINDER_SEED)
    if corpus is job_view.MISSING:
        return None, rep, None, span
    corpus = corpus.head(min(len(corpus.texts), FINDER_TEXTS))
    return corpus, rep, CorpusScoresKey(spec, corpus.key, min(n_ctx, FINDER_TOKENS)), span


def data_scores(model: ModelHandle, state: CircuitsState) -> tuple[Any, Any] | None:
    """The head finder's repeated-token and corpus scores: stored, or computed when asked."""
    corpus, rep_key, corpus_key, span = finder_keys(model)
    if corpus is None or corpus_key is None:
        return None
    rep, scores = finished(rep_key), finished(corpus_key)
    if rep is not None and scores is not None:
        st.caption("The head finder's scores at its default settings (reused).")
        return rep, scores
    if "data" not in state.asked:
        cap = corpus_key.max_tokens
        sizes = [int(tokenize(model, text, cap)[0].shape[1]) for text in corpus.texts]
        seconds = job_view.expected_seconds(
            rep_key, repeated_estimate(model, span, FINDER_BATCH)
        ) + job_view.expected_seconds(corpus_key, score_estimate(model, sizes))
        st.button(
            f"Compute the head finder's scores here ({len(sizes)} texts, "
            f"{sum(sizes):,} tokens and {FINDER_BATCH} repeated sequences; about "
            f"{seconds:.2g} s)",
            key=Circuits.RUN_DATA,
            on_click=apply,
            args=(cs.ask, "data"),
        )
        return None
    found = heads.measure(model, corpus, corpus_key.max_tokens, span, FINDER_BATCH, FINDER_SEED)
    if any(x is job_view.MISSING for x in found):
        return None
    return found


def twins(model: ModelHandle, found: WeightFindings, state: CircuitsState) -> None:
    st.markdown(
        "**Weights against data**: each weight score beside its twin measured by the "
        "head finder on text."
    )
    data = data_scores(model, state)
    if data is None:
        return
    rep, scores = data
    data_values = {
        "induction": repeated_spread(rep).mean,
        **{name: spread.mean for name, spread in scores.spreads.items()},
    }
    pair = st.selectbox(
        "Pair",
        list(TWINS),
        format_func=lambda p: f"{SCORES[TWINS[p][0]]} vs {TWINS[p][2]}",
        **bound(Circuits.TWIN, state.twin, cs.choose_twin),
    )
    weight_name, data_name, data_label = TWINS[pair]
    weight, measured = getattr(found.scores, weight_name), data_values[data_name]
    correlation = weight_data_correlation(weight, measured)
    st.plotly_chart(
        weight_vs_data(
            weight,
            measured,
            correlation,
            title=f"{SCORES[weight_name]} against the {data_label}",
            weight_name=SCORES[weight_name],
            data_name=data_label,
        ),
        width="stretch",
    )
    st.caption(
        f"Correlation over {correlation.n} heads: Pearson {correlation.pearson:.3f}, "
        f"Spearman {correlation.spearman:.3f}."
    )


def section(model: ModelHandle, state: CircuitsState) -> WeightFindings | None:
    """The weights tab."""
    st.subheader("What the weights say (no prompt needed)")
    cost = weights_cost(model)
    st.caption(f"Read from the weights alone: {cost.describe()}.")
    found = weights(model, state)
    if found is None:
        return None
    st.caption(f"Read in {found.seconds:.2f} s.")
    per_head(found, state)
    composition_view(model, found, state)
    twins(model, found, state)
    return found
