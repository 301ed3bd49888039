"""Why here: the explorer's chosen head, query and key, with the score split exactly into
(query-side part, key-side part) pairs (:mod:`models.circuits.why`).

A click on a cell of the detail heatmap selects its query and key; the key can also be typed.
*Why here?* starts one pass that keeps the head's parts (a job: priced, pooled, cancellable);
after it every cell of that head is a lookup, so moving the query or the key answers at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import streamlit as st
import torch

from models.capture.run import AttentionRun
from models.circuits.why import PartPair, WhySplit, split
from models.circuits.why_bands import BandSplit, band_split
from models.circuits.why_effects import PartEffect, part_effects_cost
from models.circuits.why_keep import KeptHead, keep, keep_cost
from models.circuits.why_rows import pair_map, row_split
from models.errors import UserError
from models.head import Head
from models.model.variants.sinks import SINK_KEY
from models.progress import Progress
from ui import session
from ui.keys import Explorer, Session
from ui.runtime import job_work, server
from ui.runtime.job_keys import RunKey, WhyEffectsKey, WhyKey
from ui.runtime.jobs import Work
from ui.sections.explorer_detail import Shown
from ui.sections.explorer_session import current_view, save, update
from ui.state import explorer as state
from ui.state.explorer import ExplorerView
from ui.text import code, md
from ui.widgets import components, job_view
from ui.widgets.component_messages import positions
from viz import why_figures

HEATMAP_CLICK = positions("query", "key")  # the shape the canvas heatmap sends a click in
TOP_EFFECTS = job_work.TOP_EFFECTS
ROW_PAIRS = 5
MAP_CELLS = 256  # the pair map shows at most this many queries and keys (the detail window)


@dataclass(frozen=True)
class Cell:
    """The cell the panel explains: query and key positions (tokens, as the explorer shows
    them)."""

    query: int
    key: int


def chosen_cell(view: ExplorerView, n_tokens: int) -> Cell:
    """The explorer's query, and the key typed or clicked (kept within the prompt)."""
    return Cell(view.query, state.why_key(view, n_tokens))


def clicked_cell(clicked: object, rows: range, keys: list[int]) -> Cell | None:
    """The cell a heatmap click names (``{query, key}``: a row and a column of the window
    drawn, whose columns are ``keys``), or None for anything else (a learned sink's column
    holds no key: no score to split)."""
    found = HEATMAP_CLICK(clicked)
    if found is None:
        return None
    row, col = found["query"], found["key"]
    if not (row < len(rows) and col < len(keys)) or keys[col] == SINK_KEY:
        return None
    return Cell(rows.start + row, keys[col])


def on_cell_click(run_key: RunKey, rows: range, keys: list[int]) -> None:
    """A click on the detail heatmap: its row becomes the query, its column the key."""
    cell = clicked_cell(components.clicked_value(Explorer.HEATMAP), rows, keys)
    if cell is None:
        return
    update(run_key, lambda view, _shape, _run: state.pick_why_cell(view, cell.query, cell.key))


def click_handler(run_key: RunKey) -> Callable[[Shown], Callable[[], None]]:
    """For :func:`ui.sections.explorer_detail.detail`: a click on a drawn cell selects it."""

    def for_shown(shown: Shown) -> Callable[[], None]:
        return lambda: on_cell_click(run_key, shown.rows, shown.keys)

    return for_shown


def on_open_head(run_key: RunKey, head: Head) -> None:
    """A part's link: open its head in the explorer (same query)."""
    update(run_key, lambda view, _shape, _run: replace(view, head=head))


def keep_work(key: WhyKey, run: AttentionRun) -> Work[KeptHead]:
    """The job keeping head ``key.head``'s parts on the run's tokens."""

    def work(progress: Progress) -> KeptHead:
        model = server.current().models.get(key.run.spec)
        return keep(model, torch.tensor([run.token_ids]), key.head, progress)

    return work


def effects_work(key: WhyEffectsKey, kept: KeptHead) -> Work[tuple[PartEffect, ...]]:
    """The job removing the top parts with the norm scales free (one resumed pass)."""

    def work(progress: Progress) -> tuple[PartEffect, ...]:
        model = server.current().models.get(key.why.run.spec)
        progress(0.0, "removing the top parts with the scales free")
        return job_work.effects_of(model, kept, key)

    return work


def on_ask(head: Head) -> None:
    save(state.ask_why(current_view(), head))


def ask(view: ExplorerView, run: AttentionRun, cell: Cell) -> None:
    """The key input and the *Why here?* button."""
    c = st.columns([2, 2, 1])
    c[0].markdown(f"**Query** {cell.query} {code(run.tokens[cell.query])} (chosen above)")
    c[1].number_input(
        "Key position",
        min_value=0,
        max_value=run.n_tokens - 1,
        step=1,
        **session.bound(Session.EXPLORER, Explorer.WHY_KEY, cell.key, state.choose_why_key),
        help="Or click a cell of the heatmap: its row becomes the query, its column the key.",
    )
    c[2].button(
        "Why here?", key=Explorer.WHY_START, type="primary", on_click=on_ask, args=(view.head,)
    )


def kept_head(run: AttentionRun, run_key: RunKey, head: Head) -> KeptHead | None:
    """The head's kept parts (a job the first time), or None while it runs."""
    model = server.current().models.get(run_key.spec)
    plan = keep_cost(model, run.n_tokens, head.layer)
    key = WhyKey(run_key, head)
    found = job_view.run_job(
        key,
        f"Keeping the parts of head {head}'s queries and keys on {run.n_tokens:,} tokens "
        f"(one pass, {plan.forward_passes:g} forward)",
        keep_work(key, run),
        cost=plan.cost,
    )
    return None if found is job_view.MISSING else found


def bands_of(kept: KeptHead, cell: Cell) -> BandSplit | None:
    if kept.query.cos is None:
        return None
    return band_split(kept, cell.query, cell.key)


def pair_words(pairs: list[PartPair]) -> str:
    return "\n".join(f"- {md(pair.words())}" for pair in pairs)


def head_links(run_key: RunKey, heads: tuple[str, ...]) -> None:
    """A button per head among the shown parts, opening it in the explorer."""
    if not heads:
        return
    st.caption("Open a head among these parts in the explorer:")
    row = st.container(horizontal=True)
    for name in heads:
        head = Head.parse(name)
        row.button(
            name,
            key=Explorer.why_open(name),
            on_click=on_open_head,
            args=(run_key, head),
        )


def effects_section(run_key: RunKey, kept: KeptHead, cell: WhySplit) -> None:
    """What removing each top part does, scales frozen and free, to the score and weight."""
    key = WhyEffectsKey(WhyKey(run_key, kept.head), cell.query, cell.key)
    model = server.current().models.get(run_key.spec)
    found = job_view.run_job(
        key,
        f"Removing the top {TOP_EFFECTS} parts of head {kept.head}'s score with the norms free",
        effects_work(key, kept),
        cost=part_effects_cost(model, kept, TOP_EFFECTS),
    )
    if found is job_view.MISSING:
        return
    st.plotly_chart(why_figures.effect_bars(found), width="stretch")
    st.dataframe(
        [
            {
                "part": e.part,
                "removed from": e.side,
                "score change (scales frozen)": e.frozen,
                "score change (scales free)": e.free,
                "weight on the key": e.weight,
                "weight without the part": e.weight_removed,
                "keys that gain most": ", ".join(
                    f"{k} ({kept.tokens[k]}) +{gain:.3f}" for k, gain in e.gainers
                ),
            }
            for e in found
        ],
        hide_index=True,
    )
    st.caption(
        "Scales frozen is the split's own meaning of exact: the change is the part's row or "
        "column sum. Scales free lets the norms recompute, so the gap between the two columns "
        "is what freezing assumes. The weight is the softmax row recomputed without the part "
        "(scales frozen): a part can raise this key's score and still cost it weight when it "
        "raises other keys more."
    )


def row_section(kept: KeptHead, cell: WhySplit) -> None:
    """The query's whole row: the pairs averaged under the row's weights."""
    row = row_split(kept, cell.query)
    pairs = [
        PartPair(a, b, float(row.expected[i, j]))
        for i, a in enumerate(row.query_parts)
        for j, b in enumerate(row.key_parts)
    ]
    pairs.sort(key=lambda pair: -abs(pair.value))
    st.markdown(
        f"**The whole row of query {cell.query}**: the pairs averaged over every key it sees, "
        "weighted by the head's weights on them."
    )
    st.markdown(pair_words(pairs[:ROW_PAIRS]))


def map_section(kept: KeptHead, cell: WhySplit, rows: range, cols: range) -> None:
    """One pair over the detail window's queries and keys."""
    options = [(p.query_part, p.key_part) for p in cell.top_pairs(8) if p.query_part != "alibi"]
    if not options:
        return
    chosen = st.selectbox(
        "One pair over the window shown",
        options,
        format_func=lambda pair: f"{pair[1]} at the key × {pair[0]} at the query",
        key=Explorer.WHY_PAIR,
    )
    if chosen is None or chosen not in options:
        return
    mapped = pair_map(kept, *chosen)
    r = range(rows.start, min(rows.stop, rows.start + MAP_CELLS))
    c = range(cols.start, min(cols.stop, cols.start + MAP_CELLS))
    window = replace(
        mapped,
        values=mapped.values[r.start : r.stop, c.start : c.stop],
        per_query=mapped.per_query[r.start : r.stop],
    )
    st.plotly_chart(why_figures.pair_map_figure(window, kept.tokens, r, c), width="stretch")


def why_panel(
    view: ExplorerView, run: AttentionRun, run_key: RunKey, rows: range, cols: range
) -> None:
    """The *Why here?* panel under the detail heatmap (token view)."""
    asked = view.why_asked == view.head
    with st.expander("Why here? Split this score into the parts that made it", expanded=asked):
        cell = chosen_cell(view, run.n_tokens)
        ask(view, run, cell)
        if not asked:
            st.caption(
                "The stream entering the head's layer is a sum of parts: the embeddings, each "
                "earlier head's output, each earlier MLP's output and the biases. With every "
                "norm's scale frozen at its value on this prompt, the score of this query and key "
                "is exactly a sum over (query-side part, key-side part) pairs."
            )
            return
        try:
            kept = kept_head(run, run_key, view.head)
            if kept is None:
                return
            found = split(kept, cell.query, cell.key)
            bands = bands_of(kept, cell)
        except UserError as err:
            session.show_error(err)
            return
        shown = why_figures.why_view(found, bands)
        st.markdown("  \n".join(md(line) for line in shown.summary))
        st.markdown("**Strongest pairs**\n" + "\n".join(f"- {md(t)}" for t in shown.top_pairs))
        head_links(run_key, shown.heads)
        st.plotly_chart(shown.pairs, width="stretch")
        st.plotly_chart(shown.parts, width="stretch")
        if shown.bands is not None:
            st.plotly_chart(shown.bands, width="stretch")
        row_section(kept, found)
        try:
            effects_section(run_key, kept, found)
        except UserError as err:
            session.show_error(err)
        map_section(kept, found, rows, cols)
