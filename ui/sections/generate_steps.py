"""The Generate page's view of a finished generation: the written tokens (probability, entropy
and alternatives on hover), the step scrubber (every head's row at the step, the chosen head's
row over prompt and earlier output), sink mass and prompt share over the steps, and the links.

All of it is one fragment: picking a step or a head redraws it alone, from the generation in
the result store (rows are rebuilt for the step shown, never kept for every step).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import streamlit as st

from models.generate import Generation
from models.head import Head, all_heads
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Generate
from ui.runtime import server
from ui.runtime.job_keys import GenerationKey
from ui.sections.generate import current_state, save, sync_link
from ui.session_state import seed_widgets
from ui.state import generate as gs
from ui.text import md
from ui.widgets import components
from viz.generate_figures import step_grid_figure, step_series_figure
from viz.generate_steps import output_spans, step_rows_figure, token_stats_figure
from viz.token_view import legend_html

STOPS = {"eos": "the model ended its text", "length": "the limit of new tokens was reached"}


def _on_output_click(n_steps: int) -> None:
    clicked = components.clicked_position(Generate.OUTPUT)
    if clicked is not None:
        save(gs.choose_step(current_state(), int(clicked), n_steps))


def _on_strip_click(n_prompt: int, n_steps: int) -> None:
    clicked = components.clicked_position(Generate.STRIP)
    if clicked is not None and int(clicked) >= n_prompt:  # a written token: the step that wrote it
        save(gs.choose_step(current_state(), int(clicked) - n_prompt, n_steps))


def _on_step(n_steps: int) -> None:
    save(gs.choose_step(current_state(), int(st.session_state[Generate.STEP]), n_steps))


def _on_head(n_layers: int, n_heads: int) -> None:
    head = st.session_state[Generate.HEAD]
    save(gs.choose_head(current_state(), head, n_layers, n_heads))


def summary(gen: Generation, written: str) -> None:
    s = gen.settings
    how = (
        f"sampled (temperature {s.temperature:g}, top-k {s.top_k or 'off'}, top-p {s.top_p:g}, "
        f"seed {s.seed})"
        if s.sampling
        else "greedy"
    )
    chat = " in its chat template" if gen.templated is not None else ""
    st.markdown(
        f"**{len(gen.steps)} tokens written** after a {gen.n_prompt:,}-token prompt"
        f"{chat}, {how}; it stopped because {STOPS[gen.stop]}. Hover a token for its "
        "probability, the entropy of the distribution it came from and the most likely "
        "alternatives; click one to open its step below."
    )
    with st.expander("The written text"):
        st.code(written, language=None, wrap_lines=True)


def output_strip(gen: Generation, step: int) -> None:
    steps = gen.steps
    spans = output_spans(
        [s.label for s in steps],
        [s.choice.prob for s in steps],
        [s.choice.entropy for s in steps],
        [list(zip(s.top_labels, s.choice.top_probs, strict=True)) for s in steps],
        step,
    )
    components.token_strip(
        spans, key=Generate.OUTPUT, on_click=lambda: _on_output_click(len(steps))
    )
    st.caption("Shade: the probability of each written token (dark: the model was sure).")


def steps_table(gen: Generation) -> None:
    with st.expander("Every step as a table"):
        st.dataframe(
            pd.DataFrame(
                {
                    "step": range(len(gen.steps)),
                    "token": [s.label for s in gen.steps],
                    "id": [s.choice.token_id for s in gen.steps],
                    "probability": [s.choice.prob for s in gen.steps],
                    "entropy (nats)": [s.choice.entropy for s in gen.steps],
                    "most likely": [
                        ", ".join(
                            f"{t} {p:.3f}"
                            for t, p in zip(s.top_labels, s.choice.top_probs, strict=True)
                        )
                        for s in gen.steps
                    ],
                }
            ),
            hide_index=True,
            width="stretch",
            key=Generate.STEPS_TABLE,
        )


def pickers(gen: Generation, step: int, head: Head) -> None:
    """The step slider and the head picker, seeded from the state."""
    facts, n = gen.facts, len(gen.steps)
    seed_widgets({Generate.STEP: step, Generate.HEAD: head})
    c = st.columns([3, 1])
    if n > 1:
        labels = [s.label for s in gen.steps]
        c[0].select_slider(
            "Step (the token it wrote)",
            range(n),
            key=Generate.STEP,
            format_func=lambda i: f"{i}: {labels[i]}",
            on_change=_on_step,
            args=(n,),
        )
    c[1].selectbox(
        "Head",
        list(all_heads(facts.n_layers, facts.n_heads)),
        key=Generate.HEAD,
        format_func=str,
        on_change=_on_head,
        args=(facts.n_layers, facts.n_heads),
    )


def step_detail(gen: Generation, step: int, head: Head) -> None:
    """What the step's query read: every head's row, then the chosen head's as a token strip."""
    rows = gen.rows(step)
    query = gen.store.first_query + step
    chosen = gen.steps[step]
    st.markdown(
        f"**Step {step}** wrote “{md(chosen.label)}” (probability {chosen.choice.prob:.3f}, "
        f"entropy {chosen.choice.entropy:.2f} nats). Its query is position {query} "
        f"(“{md(gen.tokens[query])}”); it reads the {gen.n_prompt:,} prompt tokens and the "
        f"{step} written before it (right of the dashed line)."
    )
    st.plotly_chart(
        step_rows_figure(
            rows,
            gen.n_prompt,
            step=step,
            chosen=head,
            windows=[terms.window for terms in gen.store.terms],
        ),
        width="stretch",
        key=Generate.ROWS_FIGURE,
    )
    row = rows[head.layer, head.index].astype(np.float64)
    st.markdown(
        f"**Head {head}** at step {step}: its row over the prompt and the earlier output "
        "(click a written token to open its step)."
    )
    components.token_strip(
        components.shaded(gen.tokens[: row.size], row, query, "from"),
        key=Generate.STRIP,
        on_click=lambda: _on_strip_click(gen.n_prompt, len(gen.steps)),
    )
    st.html(legend_html(row))
    sink, share = float(row[0]), float(row[: gen.n_prompt].sum())
    st.caption(
        f"Head {head}: {sink:.1%} on position 0, {share:.1%} on the prompt (position 0 "
        "included), "
        f"{1 - share:.1%} on its own output."
    )


def over_the_steps(gen: Generation, step: int, head: Head) -> None:
    """Sink mass and prompt share over the steps (mean and the chosen head), the sink mass of
    every head at this step, and how sure the model was."""
    labels = [s.label for s in gen.steps]
    left, right = st.columns([3, 2])
    left.plotly_chart(
        step_series_figure(
            gen.sink, gen.prompt_share, labels, head=head, learned_sink=gen.learned_sink
        ),
        width="stretch",
        key=Generate.SERIES_FIGURE,
    )
    right.plotly_chart(
        step_grid_figure(
            gen.sink[step], title=f"Step {step}: sink mass per head", value_name="on position 0"
        ),
        width="stretch",
        key=Generate.SINK_GRID,
    )
    mean = float(gen.sink.mean())
    st.caption(
        f"Sink mass: {mean:.1%} of all attention, over every head and step, lands on "
        f"position 0 (“{md(gen.tokens[0])}”); on the prompt, position 0 included: "
        f"{float(gen.prompt_share.mean()):.1%}"
        + (
            f"; on the heads' learned sinks, which are no token: "
            f"{float(gen.learned_sink.mean()):.1%}."
            if gen.learned_sink is not None
            else "."
        )
    )
    st.plotly_chart(
        token_stats_figure(
            [s.choice.prob for s in gen.steps],
            [s.choice.entropy for s in gen.steps],
            labels,
            step=step,
        ),
        width="stretch",
    )


def links(gen: Generation, step: int, head: Head) -> None:
    """The whole text in the explorer, and a link that writes this text again."""
    query = gen.store.first_query + step
    url = session.explorer_link(head, token=query, prompt=gen.explorer_text)
    st.markdown(
        f"[Open the whole text in the explorer ↗]({url}) (prompt and output read in one "
        f"forward pass: the same rows, with every view of the explorer)"
    )
    if not gen.explorer_exact:
        st.caption(
            "The written text tokenizes a little differently when read back, so the "
            "explorer's positions may differ from these by a token or two."
        )
    shown = replace(current_state(), settings=gen.settings, pending=True, step=step, head=head)
    sync_link(Generate.STEP_URL)
    st.markdown(
        f"[Link to this generation]({session.page_url(shown, prompt=gen.prompt)}) "
        "(model, prompt, settings and seed: it writes the same text again)"
    )


@st.fragment
@session.guard
def generation_view(model: ModelHandle, key: GenerationKey) -> None:
    """The finished generation of ``key``, with the step scrubber."""
    gen = server.current().results.get(key)
    if gen is None:
        return
    written = model.tokenizer.decode(list(gen.output_ids), skip_special_tokens=False)
    state = current_state()
    step = gs.shown_step(state, len(gen.steps))
    head = gs.shown_head(state, gen.sink)
    summary(gen, written)
    output_strip(gen, step)
    steps_table(gen)
    st.subheader("Step by step")
    pickers(gen, step, head)
    step_detail(gen, step, head)
    over_the_steps(gen, step, head)
    links(gen, step, head)
