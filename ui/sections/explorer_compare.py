"""Compare mode: prompt A (the sidebar's) against prompt B, every head ranked by how far its
pattern moved.

Prompt B's run is a capture job of its own (a :class:`RunKey` like A's); every head's divergence
is a job (:class:`CompareKey`, kept across restarts) whose cost is stated before it starts. The
divergence grid is the head grid's component drawn with numbers on colours, and clicks choose
the head as in the all-heads grid; the table sorts, and each row links to this view on its head.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import numpy as np
import pandas as pd
import streamlit as st
from plotly.colors import sample_colorscale

from models.capture.alignment import Alignment, check_cost
from models.capture.compare import (
    DIVERGENCE_RULE,
    LINEAR_RULE,
    Comparison,
    alignment_pairs,
    divergence_csv,
    head_divergence,
)
from models.capture.compare_cost import compare_cost
from models.capture.run import AttentionRun
from models.capture.words import Words
from models.errors import UserError
from models.head import Head
from models.model.forward import tokenize
from models.progress import Progress
from ui import session
from ui.keys import Explorer
from ui.runtime import server
from ui.runtime.job_keys import CompareKey, RunKey
from ui.runtime.jobs import Work
from ui.sections import explorer_results as results
from ui.sections.explorer_session import current_view, save, strongest, update
from ui.session_state import seed_widgets
from ui.state import explorer as state
from ui.text import md
from ui.widgets import components, job_view
from viz.compare_figures import (
    DIVERGENCE_COLOURS,
    divergence_scale,
    divergence_summary,
    divergence_text,
)

AUTO_START_S = 20.0  # comparisons expected to take longer wait for the visitor to start them
TABLE_LINK_CHARS = 200  # table links carry longer prompts as stored ids (270 rows stay small)


def on_prompt_b() -> None:
    save(state.set_prompt_b(current_view(), str(st.session_state.get(Explorer.PROMPT_B, ""))))


def copy_prompt_a(prompt_a: str) -> None:
    save(state.set_prompt_b(current_view(), prompt_a))


def prompt_b_box(view: state.ExplorerView, prompt_a: str) -> None:
    seed_widgets({Explorer.PROMPT_B: view.prompt_b})
    st.text_area(
        "Prompt B (compared with prompt A, the sidebar's prompt)",
        key=Explorer.PROMPT_B,
        on_change=on_prompt_b,
        height=110,
        help="Press Ctrl+Enter (or click outside) to compare. Change a word or a name "
        "of prompt A to see which heads react.",
    )
    st.button(
        "Copy prompt A here to edit it",
        on_click=copy_prompt_a,
        args=(prompt_a,),
        disabled=view.prompt_b == prompt_a,
    )


def run_b(key_b: RunKey) -> AttentionRun | None:
    """Prompt B's run (a capture job; None while it runs or when it failed, with a message)."""
    runtime = server.current()
    found = runtime.pool.finished(key_b)
    if found is not None:
        runtime.results.pin(key_b, job_view.session_id(), job_view.visitor_id())
        return found
    try:
        model = runtime.models.get(key_b.spec)
        n = int(tokenize(model, key_b.prompt, key_b.max_tokens)[0].shape[1])
        run = job_view.run_job(
            key_b,
            f"Reading the attention of prompt B ({n:,} tokens)",
            session.capture_work(model, key_b),
            cost=session.capture_cost(model, n),
        )
    except UserError as err:
        session.show_error(err)
        return None
    return None if run is job_view.MISSING else run


def gap_text(names: tuple[str, ...] | list[str], gaps: tuple[range, ...]) -> str:
    """The unaligned text of one prompt, each run quoted, at most ~120 characters."""
    if not gaps:
        return "nothing"
    quoted: list[str] = []
    used = 0
    for gap in gaps:
        text = "".join(names[gap.start : gap.stop])
        text = text if len(text) <= 40 else text[:37] + "…"
        if used + len(text) > 120:
            quoted.append(f"and {len(gaps) - len(quoted)} more")
            break
        quoted.append(f"“{md(text)}”")
        used += len(text)
    return ", ".join(quoted)


def alignment_statement(
    alignment: Alignment, names_a: list[str], names_b: list[str], words: bool
) -> None:
    """How A and B were lined up, with the unaligned parts of each shown."""
    unit = "words" if words else "tokens"
    text = md(alignment.describe(unit))
    if alignment.by_position:
        st.caption(f"Alignment ({unit}): {text}")
        return
    st.caption(
        f"Alignment ({unit}): {text} Unaligned in A: "
        f"{gap_text(names_a, alignment.unaligned('a'))}; in B: "
        f"{gap_text(names_b, alignment.unaligned('b'))}. Their weight is one 'unaligned' key "
        "column in the heatmaps below; their queries are not compared."
    )


def compare_work(key: CompareKey) -> Work[Comparison]:
    def work(progress: Progress) -> Comparison:
        runs = [server.current().results.get(k) for k in (key.run_a, key.run_b)]
        if runs[0] is None or runs[1] is None:
            raise LookupError("a run is no longer stored")
        words = (
            [results.words_of(key.run_a), results.words_of(key.run_b)]
            if key.words
            else [None, None]
        )
        return head_divergence(runs[0], runs[1], words[0], words[1], progress=progress)

    return work


def request(key: CompareKey) -> None:
    save(state.ask_compare(current_view(), key))


def megabytes(n: int) -> str:
    return "under 1 MB" if n < 2**20 else f"{n / 2**20:,.0f} MB"


def divergence(
    key: CompareKey,
    run_a: AttentionRun,
    run_b: AttentionRun,
    words: tuple[Words | None, Words | None],
) -> Comparison | None:
    """Every head's divergence, the alignment with it: a job whose cost is stated first (long
    ones wait for a click). Lining the prompts up is part of the job, done once; here only its
    cost is counted (in linear time), and only before the job is known."""
    runtime, facts = server.current(), run_a.facts
    known = runtime.pool.finished(key) is not None or runtime.pool.get(key) is not None
    pairs = 0
    try:
        if not known:
            pairs = alignment_pairs(run_a, run_b, *words)
            check_cost(pairs, "words" if key.words else "tokens")
        factored = run_a.factored and run_b.factored
        cost = compare_cost(facts, run_a.n_tokens, run_b.n_tokens, factored, pairs, key.words)
        if not known:
            seconds = job_view.expected_seconds(key, cost)
            st.caption(
                f"Comparing every head ({facts.n_layers * facts.n_heads} heads, "
                f"{run_a.n_tokens:,} × {run_b.n_tokens:,} tokens) takes "
                f"{job_view.about(seconds)} on this server and "
                f"{megabytes(cost.peak_bytes)} of memory beyond the two runs."
            )
            asked = key in current_view().compare_asked
            if seconds > AUTO_START_S and not asked:
                st.button(
                    "Compare every head",
                    key=Explorer.COMPARE_START,
                    type="primary",
                    on_click=request,
                    args=(key,),
                )
                return None
        result = job_view.run_job(
            key, "Comparing every head of prompts A and B", compare_work(key), cost=cost
        )
    except UserError as err:
        session.show_error(err)
        return None
    return None if result is job_view.MISSING else result


def on_grid_click(run_key: RunKey) -> None:
    clicked = components.clicked_head(Explorer.DIVERGENCE_GRID)
    if clicked:
        head = Head.parse(clicked)
        update(run_key, lambda v, s, r: state.choose_head(v, head, s, strongest(r)))


def on_table_select(run_key: RunKey, key: CompareKey) -> None:
    table = st.session_state.get(Explorer.DIVERGENCE_TABLE)
    rows = table.selection.rows if table is not None else []
    found = server.current().pool.finished(key)
    if rows and found is not None:
        head = Head.parse(str(found.ranking()["head"].iloc[int(rows[0])]))
        update(run_key, lambda v, s, r: state.choose_head(v, head, s, strongest(r)))


def cells(divergence: np.ndarray, small: bool) -> list[dict[str, str]]:
    """The grid's cells: each head's divergence written on its colour (0 white, darkest the
    largest divergence but never below :data:`DIVERGENCE_FLOOR`, so rounding noise stays pale);
    a head not compared (NaN: a linear-attention layer) is an empty slot."""
    values = np.nan_to_num(np.asarray(divergence, dtype=np.float64))
    shades = np.clip(values / divergence_scale(values), 0.0, 1.0).ravel()
    colours = sample_colorscale(DIVERGENCE_COLOURS, shades.tolist())
    n_heads = values.shape[1]
    out = []
    missing = ~np.isfinite(np.asarray(divergence, dtype=np.float64)).ravel()
    for i, (value, shade, colour) in enumerate(zip(values.ravel(), shades, colours, strict=True)):
        head = Head(i // n_heads, i % n_heads)
        if missing[i]:
            out.append({"id": str(head), "none": f"head {head}: linear attention, not compared"})
            continue
        out.append(
            {
                "id": str(head),
                "fill": colour,
                "ink": "#fff" if shade > 0.55 else "#222",
                "text": divergence_text(float(value), compact=small),
                "title": f"head {head}: divergence {value:.4g} bits",
            }
        )
    return out


def grid(view: state.ExplorerView, comparison: Comparison, run_key: RunKey) -> None:
    values = comparison.divergence
    n_layers, n_heads = values.shape
    cell = 72 if n_heads <= 6 else 52 if n_heads <= 12 else 36
    st.subheader("Divergence of every head")
    names = [str(Head(li, hi)) for li in range(n_layers) for hi in range(n_heads)]
    st.caption(
        "Mean Jensen–Shannon divergence between A's and B's rows, in bits. "
        f"{divergence_summary(values, names)} Click a head to open it."
    )
    components.head_grid(
        cells(values, cell < 52),
        n_heads,
        str(view.head),
        Explorer.DIVERGENCE_GRID,
        lambda: on_grid_click(run_key),
        cell_px=cell,
        kind="divergence",
    )


def table(
    view: state.ExplorerView, comparison: Comparison, run_key: RunKey, key: CompareKey
) -> None:
    ranking = comparison.ranking()
    base = session.page_query(view, run_key.prompt, TABLE_LINK_CHARS)  # long prompts stored once
    links = [
        "./?" + urlencode({**base, "layer": str(layer), "head": str(index)})
        for layer, index in zip(ranking["layer"], ranking["index"], strict=True)
    ]
    shown = pd.DataFrame(
        {"L.H": ranking["head"], "divergence": ranking["divergence"], "link": links}
    )
    st.dataframe(
        shown,
        hide_index=True,
        height=330,
        key=Explorer.DIVERGENCE_TABLE,
        on_select=lambda: on_table_select(run_key, key),
        selection_mode="single-row",
        column_config={
            "divergence": st.column_config.NumberColumn("divergence (bits)", format="%.5f"),
            "link": st.column_config.LinkColumn(
                "link", display_text="open", help="This comparison on that head"
            ),
        },
    )
    st.download_button(
        "Download every head's divergence (CSV)",
        divergence_csv(comparison.divergence),
        file_name="divergence.csv",
        mime="text/csv",
        key=Explorer.COMPARE_CSV,
        on_click="ignore",
    )


def overview(
    view: state.ExplorerView, comparison: Comparison, run_key: RunKey, key: CompareKey
) -> None:
    """The ranking: grid and table side by side, then the rule."""
    left, right = st.columns([1, 1])
    with left:
        grid(view, comparison, run_key)
    with right:
        st.subheader("Ranked")
        table(view, comparison, run_key, key)
    linear = bool(np.isnan(comparison.divergence).all(axis=1).any())  # a layer left out
    st.caption(md(DIVERGENCE_RULE + (" " + LINEAR_RULE if linear else "")))


def prepare(
    view: state.ExplorerView, run_a: AttentionRun, key_a: RunKey, words_a: Words | None
) -> tuple[Any, ...] | None:
    """Prompt B's box and run, the alignment and every head's divergence; None until all are
    there (messages shown)."""
    prompt_b_box(view, key_a.prompt)
    if not view.prompt_b.strip():
        st.info(
            "Type prompt B above (or copy prompt A and change a few words) to see which "
            "heads attend differently."
        )
        return None
    key_b = replace(key_a, prompt=view.prompt_b)
    found_b = run_b(key_b)
    if found_b is None:
        return None
    if found_b.truncated:
        st.warning(
            f"Prompt B has {found_b.n_prompt_tokens:,} tokens; only the first "
            f"{found_b.n_tokens:,} are compared."
        )
    words_b = results.words_of(key_b) if words_a is not None else None
    key = CompareKey(key_a, key_b, words_a is not None)
    comparison = divergence(key, run_a, found_b, (words_a, words_b))
    if comparison is None:
        return None
    names_a = list(words_a.labels) if words_a is not None else list(run_a.tokens)
    names_b = list(words_b.labels) if words_b is not None else list(found_b.tokens)
    alignment_statement(comparison.alignment, names_a, names_b, words_a is not None)
    return found_b, key_b, words_b, comparison, key
