"""The explorer's interactive view: the head grid, the chosen head in detail, the tokens; or,
in compare mode, every head ranked by how far it moved between two prompts.

Everything runs inside one fragment, so a click on a head, a token, the overview or an option
reruns only this view, not the page. The view is one :class:`ui.state.explorer.ExplorerView` in
the session; every click replaces it through a pure transition, and the widgets only show it,
so the view survives a visit to another page.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from models.capture.run import AttentionRun
from models.capture.sinks import SinkSummary, measured_sink, sink_cost
from models.capture.weighted import ValueWeighting, weighting_cost
from models.capture.words import WORD_RULE, Words
from models.errors import UserError
from models.head import Head
from models.model.facts import ModelFacts
from ui import session
from ui.keys import Explorer
from ui.runtime.job_keys import RunKey, SinkSummaryKey, WeightingKey
from ui.sections import explorer_compare as compare_section
from ui.sections import explorer_compare_detail as compare_detail
from ui.sections import explorer_detail as detail
from ui.sections import explorer_export as export
from ui.sections import explorer_results as results
from ui.sections import explorer_strip as strip
from ui.sections import explorer_why as why
from ui.sections.explorer_difference import Pair
from ui.sections.explorer_session import current_view, save, seed, strongest, update
from ui.session_state import forget, keep, seed_widgets
from ui.state import explorer as state
from ui.state.explorer import ExplorerView, RunShape, unit_of
from ui.text import md
from ui.widgets import components, job_view

TOKEN_MENU = 256  # up to this many tokens (or words), the query is picked from a labelled list
GRID_BOX_PX = 540  # the grid box's height (560 px) less its row of head numbers
MODES: dict[state.Mode, str] = {"single": "One prompt", "compare": "Compare two prompts"}


def intro(run: AttentionRun) -> DeltaGenerator | None:
    """One line on the model and prompt (the dtype it ran in), and hints where they help.

    Returns:
        For a low-precision run, the place under that line where :func:`precision_note` says
        how far its patterns lie from float32 (filled once the view is drawn); else None.
    """
    facts = run.facts
    st.caption(
        f"**{md(facts.name)}** · {facts.n_layers} layers × {facts.n_heads} heads "
        f"({facts.attention_kind}, {facts.n_kv_heads} key/value heads) · d_head {facts.d_head} · "
        f"{'causal' if facts.causal else 'bidirectional (no causal mask)'} · "
        f"positions: {facts.positional} · {run.n_tokens:,} tokens · {run.dtype}"
    )
    slot = st.empty() if run.dtype != "float32" else None
    if run.spec is not None and run.spec.kind == "bundled":
        st.caption(
            "The bundled model is a small toy trained on Python. For a real language "
            "model's induction heads and attention sinks, choose **SmolLM2-135M (offline)** "
            "in the sidebar and the example *A passage, twice (about 2,000 tokens)*."
        )
    return slot


def precision_note(run: AttentionRun, key: RunKey, slot: DeltaGenerator | None) -> None:
    """How far a low-precision run's patterns lie from float32, measured on its first rows, in
    the place :func:`intro` kept. Called after the view is drawn: the float32 pass then starts
    when the page no longer needs the processor."""
    if slot is None:
        return
    with slot.container():
        try:
            found = results.difference(key, run)
        except UserError as err:
            session.show_error(err)
            return
        if found is not job_view.MISSING:
            st.caption(results.difference_text(found, run.dtype))


def sink_hint(run: AttentionRun, key: RunKey) -> None:
    """What this run's heads actually sink into, measured on a few rows of every head."""
    found = job_view.run_job(
        SinkSummaryKey(key),
        "Finding where the heads park their attention",
        lambda progress: measured_sink(run),
        cost=sink_cost(run),
        background="Finding where the heads park their attention…",
    )
    if found is job_view.MISSING:
        return
    told = found.gated_weight is not None or found.learned_weight is not None
    if found.mean_weight < 0.2 and not told:
        return
    label = f"“{md(run.tokens[found.position])}”"
    special = (
        " (a special token the tokenizer adds)"
        if (found.position == 0 and run.first_is_special)
        else ""
    )
    st.caption(
        f"Attention sink: position {found.position}, {label}{special}, takes "
        f"{found.mean_weight:.1%} of the attention on average over every head "
        f"(measured on {len(found.rows)} query rows); it is the favourite key of "
        f"{found.n_heads} of {found.n_total} heads." + sink_variants_text(found)
    )


def sink_variants_text(found: SinkSummary) -> str:
    """What output gates and learned sinks do to the sink, measured on the same rows."""
    said = ""
    if found.gated_weight is not None:
        ratio = found.gated_weight / found.mean_weight if found.mean_weight > 0 else 1.0
        said += (
            f" Through the output gates it passes on {found.gated_weight:.1%} (each head's "
            f"weight there times its gate at the query, mean over the gate's dimensions): the "
            f"gates keep {ratio:.0%} of the raw sink."
        )
    if found.learned_weight is not None:
        said += (
            f" The heads' learned sinks, which are no token, take {found.learned_weight:.1%} "
            "on the same rows."
        )
    return said


def full_run() -> None:
    """A full page run redraws the grid from scratch: the pictures must be sent again."""
    forget(Explorer.GRID_SHOWN)


def on_head_click(run_key: RunKey) -> None:
    clicked = components.clicked_head(Explorer.GRID)
    if clicked:
        head = Head.parse(clicked)
        update(run_key, lambda v, s, r: state.choose_head(v, head, s, strongest(r)))


def on_selectors(run_key: RunKey, starts: list[int] | None = None) -> None:
    """Layer, head or query changed; ``starts`` (each unit's first token) when the query is
    picked by its position rather than from the list."""
    ss = st.session_state
    head = Head(int(ss[Explorer.LAYER]), int(ss[Explorer.HEAD]))
    token = int(ss[Explorer.TOKEN]) if starts is None else starts[int(ss[Explorer.TOKEN_AT])]

    def change(view: ExplorerView, shape: RunShape, run: AttentionRun) -> ExplorerView:
        if head != view.head:
            view = state.choose_head(view, head, shape, strongest(run))
        if token != view.token:
            view = state.choose_token(view, token, shape, strongest(run))
        return view

    update(run_key, change)


def on_mode() -> None:
    mode = st.session_state.get(Explorer.MODE) or current_view().mode
    save(state.set_mode(current_view(), mode))


def on_words() -> None:
    save(state.set_words(current_view(), bool(st.session_state.get(Explorer.WORDS))))


def mode_bar(view: ExplorerView) -> None:
    """One prompt or two, tokens or words."""
    seed_widgets({Explorer.MODE: view.mode, Explorer.WORDS: view.words})
    c = st.columns([3, 2])
    c[0].segmented_control(
        "View",
        list(MODES),
        key=Explorer.MODE,
        format_func=MODES.__getitem__,
        on_change=on_mode,
        label_visibility="collapsed",
    )
    c[1].toggle(
        "Word view (merge sub-word tokens)", key=Explorer.WORDS, on_change=on_words, help=WORD_RULE
    )
    note = st.container()  # always there, so the elements after it keep their places
    if view.words:
        note.caption(f"Word view. {md(WORD_RULE)} The grid's pictures stay in tokens.")


def token_options(run: AttentionRun, words: Words | None) -> tuple[list[int], Callable[[int], str]]:
    """The query selector's options (token positions; a word by its first token) and labels."""
    if words is None:
        labels = run.labels()
        return list(range(run.n_tokens)), lambda token: labels[token]
    word_labels = words.axis_labels()
    return list(words.starts[:-1]), lambda token: word_labels[words.word_of(token)]


def selectors(
    view: ExplorerView, facts: ModelFacts, run: AttentionRun, key: RunKey, words: Words | None
) -> None:
    seed_widgets({Explorer.LAYER: view.head.layer, Explorer.HEAD: view.head.index})
    options, show = token_options(run, words)
    unit = "Word" if words is not None else "Token"
    # A list of every token is sent again on every click (2,048 labels cost a click ~50 ms in
    # the browser): past TOKEN_MENU units the query is picked by its position.
    starts = None if len(options) <= TOKEN_MENU else options
    args = (key, starts)
    c = st.columns([1, 1, 2])
    c[0].selectbox(
        "Layer", range(facts.n_layers), key=Explorer.LAYER, on_change=on_selectors, args=args
    )
    c[1].selectbox(
        "Head",
        range(run.heads_in(view.head.layer)),
        key=Explorer.HEAD,
        on_change=on_selectors,
        args=args,
    )
    if starts is None:
        seed_widgets({Explorer.TOKEN: options[unit_of(view.query, words)]})
        c[2].selectbox(
            f"{unit} (query)",
            options,
            key=Explorer.TOKEN,
            format_func=show,
            on_change=on_selectors,
            args=args,
        )
        return
    seed_widgets({Explorer.TOKEN_AT: unit_of(view.query, words)})
    c[2].number_input(
        f"{unit} (query), by position",
        min_value=0,
        max_value=len(starts) - 1,
        step=1,
        key=Explorer.TOKEN_AT,
        on_change=on_selectors,
        args=args,
        help=f"0 to {len(starts) - 1:,}; or click a {unit.lower()} in the strip below. The "
        "heatmap's outlined row (its column, for which tokens attend to it) and the strip "
        "show which one it is.",
    )


def weighting_toggle(view: ExplorerView, run: AttentionRun, key: RunKey) -> ValueWeighting | None:
    """The value-weighting toggle; the run's weighting while on (None while off or computing)."""
    seed_widgets({Explorer.WEIGHTED: view.weighted})
    on = st.toggle(
        "Value-weighted: how much each head writes from each key",
        key=Explorer.WEIGHTED,
        on_change=strip.on_options,
        help="Each weight A[i, j] times ||v_j W_O|| (the size of what the head writes "
        "when it reads key j), rows renormalised to sum to 1 (Kobayashi et al. "
        "2020). A sink the head looks at but writes almost nothing from fades.",
    )
    if not on:
        return None
    for note in weighting_notes(run):
        st.caption(note)
    try:
        found = job_view.run_job(
            WeightingKey(key),
            "Weighting every head by its values",
            results.weighting_work(key),
            cost=weighting_cost(run),
        )
    except UserError as err:
        session.show_error(err)
        return None
    return None if found is job_view.MISSING else found


def weighting_notes(run: AttentionRun) -> list[str]:
    """What value weighting means on a run's variant layers: a gate makes what a head writes
    from key j depend on the query too; a linear layer has no weights to weight."""
    extras, said = run.extras, list[str]()
    if extras is None:
        return said
    if extras.gates:
        layers = ", ".join(str(layer) for layer in sorted(extras.gates))
        said.append(
            f"Gated layers ({layers}): each weight A[i, j] times ||(g_i ⊙ v_j) W_O||, what the "
            "head writes from key j through its output gate g_i at query i, computed for every "
            "pair of query and key."
        )
    linear = [str(layer) for layer, v in enumerate(extras.layers) if not v.softmax]
    if linear:
        said.append(
            f"Linear-attention layers ({', '.join(linear)}) have no softmax weights: they "
            "keep their signed mixing matrix, unweighted."
        )
    return said


def grid(view: ExplorerView, run: AttentionRun, key: RunKey, weighted: bool) -> None:
    ss = st.session_state
    st.subheader("All heads")
    linear = [layer for layer in range(run.facts.n_layers) if run.signed(layer)]
    st.caption(
        "Each picture is one head's whole pattern (rows: queries, columns: keys), "
        "max-pooled and scaled to its own strongest weight. Click one to open it."
        + (
            f" Linear-attention layers ({', '.join(map(str, linear))}) show their signed "
            "mixing matrix instead, pooled by the largest magnitude and scaled to it: red "
            "positive, blue negative, white 0."
            if linear
            else ""
        )
    )
    layers = results.layer_rows(run)
    if layers is not None:
        st.caption(results.LAYER_MARKS)
    marks = results.marks(key)
    found = {} if marks is job_view.MISSING else marks
    shown = (key, weighted, marks is job_view.MISSING)  # the marks' arrival redraws the grid
    cells: list[dict[str, str]] | None = None  # a rerun that only moves the selection: keep
    if ss.get(Explorer.GRID_SHOWN) != shown:  # the pictures off the wire (and unbuilt)
        cells = results.marked(results.thumbnails(key, weighted), found)
    keep(Explorer.GRID_SHOWN, shown)
    n_heads = run.grid_heads
    cell = 72 if n_heads <= 6 else 52 if n_heads <= 12 else 36
    components.head_grid(
        cells,
        n_heads,
        str(view.head),
        Explorer.GRID,
        lambda: on_head_click(key),
        cell_px=cell,
        on_missing=full_run,
        layers=layers,
    )
    if run.facts.n_layers * (cell + 4) > GRID_BOX_PX:
        st.caption(f"Scroll inside the box for all {run.facts.n_layers} layers.")
    if found:
        st.caption(results.MARKS_NOTE)


def single(view: ExplorerView, run: AttentionRun, key: RunKey, words: Words | None) -> None:
    """One prompt: the grid, the chosen head in detail, the strip, and the export."""
    weighting = weighting_toggle(view, run, key)
    left, right = st.columns([1, 1])
    with left:
        grid(view, run, key, weighting is not None)
    with right:
        st.subheader(f"Head {view.head}")
        detail.controls(view, run, key, weighting is not None)
    if words is None:
        shown = detail.detail(view, run, key, weighting, on_cell=why.click_handler(key))
    else:
        shown = detail.detail(view, run, key, weighting, words)
    if run.extras is not None:
        for note in run.extras.notes(view.head.layer, view.head.index, view.query):
            st.caption(md(note))
    strip.strip(current_view(), run, key, weighting, words)
    if words is None:
        why.why_panel(current_view(), run, key, shown.rows, shown.cols)
    else:
        st.caption("Why here? splits a score between two tokens: turn the word view off to use it.")
    export.button(
        current_view(),
        key,
        shown.heatmap,
        list(words.labels) if words is not None else list(run.tokens),
        weighting is not None,
        run.grid_heads,
        run.facts.name,
    )


def compare(view: ExplorerView, run: AttentionRun, key: RunKey, words: Words | None) -> None:
    """Prompt A against prompt B: the ranking, then the chosen head's A, B and A − B."""
    forget(Explorer.GRID_SHOWN)  # the pictures grid is not on screen
    found = compare_section.prepare(view, run, key, words)
    if found is None:
        return
    run_b, _key_b, words_b, comparison, compare_key = found
    compare_section.overview(view, comparison, key, compare_key)
    view = current_view()
    st.subheader(f"Head {view.head}: A, B and A − B")
    if run.signed(view.head.layer):
        st.info(
            f"Layer {view.head.layer} is linear attention, not a softmax: it has no attention "
            "rows to compare. Pick a head of another layer in the grid."
        )
        return
    pair = Pair(run, run_b, key, comparison.alignment, words, words_b)
    mean = float(comparison.divergence[view.head.layer, view.head.index])
    figures = compare_detail.head_view(view, pair, mean, compare_key)
    if figures is not None:
        export.button(
            current_view(),
            key,
            figures.difference,
            pair.names("a"),
            False,
            run.facts.n_heads,
            run.facts.name,
        )


@st.fragment
@session.guard
def explorer_view(key: RunKey) -> None:
    """The whole interactive view; reruns alone on every click.

    Takes the run's key, not the run: Streamlit keeps a fragment's arguments for as long as the
    browser session lingers, which would pin a long prompt's q and k in memory after the shared
    store had let it go. A run the store has dropped is captured again through the pool.
    """
    run = results.run_or_recapture(key)
    if run is None:
        return
    view = seed(run, key)
    mode_bar(view)
    words = results.words_of(key) if view.words else None
    selectors(view, run.facts, run, key, words)
    if view.mode == "compare":
        compare(view, run, key, words)
    else:
        single(view, run, key, words)
    components.sync_url(session.page_query(current_view(), key.prompt))
