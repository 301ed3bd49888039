"""The Generate page's cache-eviction experiment: perplexity under each policy against the
budget, as a job with progress and Cancel, its cost stated before it runs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from models.classroom.costs import human_bytes
from models.errors import UserError
from models.generate.policies import POLICIES, POLICY_NAMES
from models.generate.sweep import (
    EvictionResult,
    EvictionSettings,
    estimate,
    eviction_against_plain,
    model_passage,
    sink_verdict,
)
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Generate
from ui.runtime.job_keys import EvictionKey
from ui.runtime.policy import AllowedSpec
from ui.sections.generate import current_state, save
from ui.session_state import seed_widgets
from ui.state import generate as gs
from ui.text import md
from ui.widgets import job_view
from viz.generate_figures import eviction_figure

SOURCE_LABELS = {
    "passage": "The bundled passage",
    "prompt": "The sidebar's prompt",
    "pasted": "Text I paste",
}
LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192)
BOUNDED = tuple(p for p in POLICIES if p != "full")


# --- the eviction experiment -------------------------------------------------------------------


def _on_eviction() -> None:
    ss = st.session_state
    save(
        gs.with_eviction(
            current_state(),
            gs.EvictionChoice(
                source=ss[Generate.EVICT_SOURCE],
                pasted=ss.get(Generate.EVICT_TEXT, current_state().eviction.pasted),
                budgets=tuple(sorted(ss[Generate.EVICT_BUDGETS])),
                sinks=int(ss[Generate.EVICT_SINKS]),
                policies=tuple(ss[Generate.EVICT_POLICIES]),
                max_tokens=int(ss[Generate.EVICT_MAX_TOKENS]),
            ),
        )
    )


def _on_run(text: str, n_tokens: int, spec: AllowedSpec) -> None:
    state = gs.ask_sweep(current_state(), text, n_tokens)
    save(state)
    assert state.sweep is not None
    key = EvictionKey(spec, text, state.sweep.settings)
    job_view.start_again(key)


def eviction_controls(model: ModelHandle, choice: gs.EvictionChoice, n_tokens: int) -> None:
    limit = model.facts.n_ctx
    lengths = [n for n in LENGTHS if n < limit] + [limit]
    seed_widgets(
        {
            Generate.EVICT_SOURCE: choice.source,
            Generate.EVICT_SINKS: choice.sinks,
            Generate.EVICT_POLICIES: list(choice.policies),
            Generate.EVICT_MAX_TOKENS: min(lengths, key=lambda n: abs(n - choice.max_tokens)),
            Generate.EVICT_BUDGETS: list(choice.budgets or gs.suggested_budgets(n_tokens)),
        }
    )
    c = st.columns([2, 3, 1, 2])
    c[0].radio(
        "Text",
        gs.TEXT_SOURCES,
        key=Generate.EVICT_SOURCE,
        on_change=_on_eviction,
        format_func=SOURCE_LABELS.__getitem__,
        help="The bundled passage is text like the model's own: held-out Python source for "
        "the bundled GPT-2 (trained on Python), English passages for every other model.",
    )
    c[1].multiselect(
        "Cache budgets (keys each token may see)",
        gs.BUDGET_CHOICES,
        key=Generate.EVICT_BUDGETS,
        on_change=_on_eviction,
    )
    c[2].number_input(
        "Sink tokens", 0, gs.MAX_SINKS, key=Generate.EVICT_SINKS, on_change=_on_eviction
    )
    if len(lengths) > 1:
        c[3].select_slider(
            "Read at most (tokens)", lengths, key=Generate.EVICT_MAX_TOKENS, on_change=_on_eviction
        )
    else:  # one length (the bundled model's 128-token context): nothing to choose
        c[3].caption(f"Reads at most {lengths[0]:,} tokens (the model's context).")
    st.multiselect(
        "Policies",
        BOUNDED,
        key=Generate.EVICT_POLICIES,
        on_change=_on_eviction,
        format_func=POLICY_NAMES.__getitem__,
    )
    if choice.source == "pasted":
        seed_widgets({Generate.EVICT_TEXT: choice.pasted})
        st.text_area("Your text", key=Generate.EVICT_TEXT, height=120, on_change=_on_eviction)


def chosen_text(model: ModelHandle, choice: gs.EvictionChoice) -> str:
    if choice.source == "passage":
        return model_passage(model)
    return session.current_prompt() if choice.source == "prompt" else choice.pasted


def eviction_section(model: ModelHandle) -> None:
    """Settings, the stated cost, Run, then the plot, the table and what the numbers say."""
    if not model.facts.causal:
        st.info(
            f"{md(model.facts.name)} is an encoder: it reads the whole text at once and "
            "keeps no KV cache, so there is nothing to evict. Load a decoder such as SmolLM2."
        )
        return
    state = current_state()
    choice = state.eviction
    text = chosen_text(model, choice)
    n: int | None = None
    problem: UserError | None = None
    if text.strip():
        try:
            n = int(tokenize(model, text, choice.max_tokens)[0].shape[1])
        except UserError as err:
            problem = err
    eviction_controls(model, choice, n or min(choice.max_tokens, model.facts.n_ctx))
    if problem is not None:
        session.show_error(problem)
    elif n is None:
        st.info(
            "The sidebar's prompt is empty."
            if choice.source == "prompt"
            else "Paste a text above (a few hundred tokens or more) to read it under each policy."
        )
    else:
        cost_and_run(model, text, n, gs.eviction_settings(choice, n))
    if state.sweep is not None:
        try:
            eviction_result(model, state.sweep)
        except UserError as err:
            session.show_error(err)


def cost_and_run(model: ModelHandle, text: str, n: int, settings: EvictionSettings) -> None:
    """What the sweep will cost, stated before it runs, and the button that runs it."""
    problems = settings.problems()
    if problems:
        st.warning(md(" ".join(problems)))
    cost = estimate(model, n, settings)
    key = EvictionKey(session.allowed_spec(model), text, settings)
    seconds = job_view.expected_seconds(key, cost)
    runs = len(settings.policies) * len(settings.budgets)
    st.caption(
        f"Reads {n:,} tokens once with the full cache, then each of {runs} policy and budget "
        f"pairs from the point where its cache first fills: about {max(seconds, 1):,.0f} s "
        f"(an estimate) and up to {human_bytes(cost.peak_bytes)} of memory beside the model."
    )
    st.button(
        f"Run the experiment ({job_view.about(seconds)})",  # priced like every start button
        key=Generate.EVICT_RUN,
        type="primary",
        on_click=_on_run,
        args=(text, n, session.allowed_spec(model)),
        disabled=bool(problems),
    )


def eviction_result(model: ModelHandle, sweep: gs.SweepRequest) -> None:
    key = EvictionKey(session.allowed_spec(model), sweep.text, sweep.settings)
    n = int(tokenize(model, sweep.text, sweep.settings.max_tokens)[0].shape[1])
    cost = estimate(model, n, sweep.settings)
    found = job_view.run_job(
        key,
        f"Reading {n:,} tokens under each eviction policy",
        lambda p: eviction_against_plain(model, sweep.text, sweep.settings, p),
        cost=cost,
    )
    if found is job_view.MISSING:
        return
    result, plain = found
    show_result(result, plain)


def show_result(result: EvictionResult, plain: float) -> None:
    rows = result.rows()
    st.plotly_chart(
        eviction_figure(rows, n_tokens=result.n_tokens, names=POLICY_NAMES),
        width="stretch",
        key=Generate.EVICT_FIGURE,
    )
    st.dataframe(
        pd.DataFrame(
            {
                "policy": [POLICY_NAMES[p] for p, _, _ in rows],
                "budget": [b for _, b, _ in rows],
                "perplexity": [ppl for _, _, ppl in rows],
                "× full cache": [ppl / result.full_perplexity for _, _, ppl in rows],
            }
        ),
        hide_index=True,
        width="stretch",
        key=Generate.EVICT_TABLE,
    )
    st.markdown(
        f"**Full budget equals plain perplexity:** with the whole cache ({result.n_tokens:,} "
        f"tokens) the experiment's own pass gives {result.full_perplexity:.4f}; a plain forward "
        f"pass with labels gives {plain:.4f} (difference {abs(result.full_perplexity - plain):.1e}"
        ")."
    )
    st.markdown(f"**What this model does, measured on this text:** {md(sink_verdict(result))}")
    st.caption(
        f"Positions under sinks + window: {md(result.positions)}. Sliding window keeps "
        f"the most recent tokens; heavy hitters keep half the budget for the keys with the "
        f"most attention so far (per key/value head) and half for the most recent."
    )
