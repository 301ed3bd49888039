"""Head atlas: the selected head's card (metrics with their uncertainty and rank, the weight
scores beside their data twins, decile samples linked into the explorer, the low-rank view)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from models.head import Head
from models.heads.atlas.card import HeadCard, MetricLine, SpaceView, head_card
from models.heads.atlas.compute import Atlas
from models.heads.atlas.lowrank import SPACES
from ui import session
from ui.text import code, md

SPACE_WORDS = {
    "query": "Queries (what a token asks for)",
    "key": "Keys (what a token offers)",
    "value": "Values (what it passes on)",
    "output": "Outputs (what the head writes)",
}


def value_text(line: MetricLine) -> str:
    """``0.412 ± 0.013`` (or the status in words)."""
    if line.status == "not_applicable":
        return "does not apply"
    if line.value is None:
        return "not measured"
    unit = f" {line.unit}" if line.unit else ""
    spread = f" ± {line.se:.3g}" if line.se is not None else ""
    return f"{line.value:.4g}{spread}{unit}"


def metrics_frame(card: HeadCard) -> pd.DataFrame:
    """One row per quantity: value ± SE, rank, and the rule or the reason."""
    return pd.DataFrame(
        {
            "Quantity": [line.label for line in card.metrics],
            "Value": [value_text(line) for line in card.metrics],
            "Rank": [f"{line.rank} of {line.of}" if line.rank else "" for line in card.metrics],
            "How sure": [line.note for line in card.metrics],
        }
    )


def twins(card: HeadCard) -> None:
    for weight, data in card.twins:
        w, d = card.metric(weight), card.metric(data)
        st.markdown(
            f"- **{md(w.label)}** {md(value_text(w))} (rank {w.rank or '–'}) · its data twin "
            f"**{md(d.label)}** {md(value_text(d))} (rank {d.rank or '–'})"
        )


def samples(atlas: Atlas, card: HeadCard) -> None:
    """The decile samples, each a link into the explorer on that text at the peak's query."""
    rows = []
    for s in card.samples:
        tokens = atlas.tokens[s.text]
        url = session.explorer_link(card.head, token=s.query, prompt=atlas.texts[s.text])
        rows.append(
            {
                "Decile": s.decile + 1,
                "Activation": s.activation,
                "Query": f"({s.query}) {tokens[s.query]}",
                "Key": f"({s.key}) {tokens[s.key]}",
                "Context": "".join(tokens[max(0, s.key - 6) : s.query + 1]),
                "Open": url,
            }
        )
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        column_config={
            "Activation": st.column_config.NumberColumn(format="%.3f"),
            "Open": st.column_config.LinkColumn("Explorer", display_text="open ↗"),
        },
    )


def space(view: SpaceView) -> None:
    if view.owner is not None:
        st.caption(f"Shared key/value head {view.owner} (its query heads share these vectors).")
    for comp in view.components:
        ends = [
            " ".join(code(load.token.strip() or "␣") for load in loads)
            for loads in (comp.positive, comp.negative)
        ]
        st.markdown(
            f"**PC{comp.index + 1}** ({comp.share:.0%} of the variance) · high end: {ends[0]} "
            f"· low end: {ends[1]}"
        )


def card(atlas: Atlas, head: Head) -> None:
    """The whole card of ``head``."""
    found = head_card(atlas, head)
    st.subheader(f"Head {head}")
    st.caption(
        ("Flagged as: " + ", ".join(found.flags) if found.flags else "Not flagged by the finder")
        + f" · [open in the explorer]({session.explorer_link(head)})"
    )
    st.dataframe(metrics_frame(found), hide_index=True, width="stretch")
    st.markdown("**The weights beside the data**")
    twins(found)
    st.markdown(
        "**Where it fires**: texts sampled across the deciles of its activation (its "
        "strongest weight in each text, the first key left out)"
    )
    samples(atlas, found)
    st.markdown(
        f"**Low-rank view**: principal components over {found.lowrank[0].n_tokens:,} corpus "
        "tokens (position 0 left out), with the tokens at either end of each"
    )
    for tab, view in zip(st.tabs([SPACE_WORDS[s] for s in SPACES]), found.lowrank, strict=True):
        with tab:
            space(view)
