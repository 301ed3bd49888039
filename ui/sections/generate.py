"""The Generate page's writing sections: the settings, the generation as a streamed job, the
written tokens, and the step scrubber (every head's row at a step, the chosen head's row as a
token strip, sink mass and prompt share over the steps).

The page's state is one :class:`ui.state.generate.GenerateState` in the session; widgets show
it and their callbacks replace it through its pure transitions. The scrubber is a fragment: a
new step or head redraws it alone, from the finished generation in the result store.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

import streamlit as st

from models.cost import Cost
from models.errors import UserError
from models.generate import Generation
from models.generate.cost import generation_estimate
from models.generate.settings import (
    DECODINGS,
    MAX_NEW_TOKENS,
    GenerationSettings,
    chat_text,
    check,
    prepare_prompt,
)
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Generate
from ui.runtime import job_work
from ui.runtime.job_keys import GenerationKey
from ui.runtime.jobs import Partial
from ui.runtime.policy import AllowedSpec
from ui.session_state import keep, seed_widgets
from ui.state import generate as gs
from ui.state.generate import GenerateState, Request
from ui.text import md
from ui.widgets import components, job_view

DECODING_LABELS = {"greedy": "Greedy (most likely token)", "sample": "Sampled"}


# --- the state in the session -----------------------------------------------------------------


def current_state() -> GenerateState:
    """The session's state, or the one its link asks for (notes about the link shown once)."""
    found = st.session_state.get(Generate.STATE)
    if isinstance(found, GenerateState):
        return found
    state = session.opened_with().generate
    for note in session.link_notes("generate"):
        st.info(md(note))
    save(state)
    return state


def save(state: GenerateState) -> None:
    keep(Generate.STATE, state)


def has_template(model: ModelHandle) -> bool:
    return bool(getattr(model.tokenizer, "chat_template", None))


def request_key(model: ModelHandle, request: Request) -> GenerationKey:
    return GenerationKey(session.allowed_spec(model), request.prompt, request.settings)


def sync_link(key: str = Generate.URL) -> None:
    """The page's state in the address bar: the settings, and for a generation shown, its
    prompt, step and head (opening the link writes the same text again). ``key``: the step
    scrubber, a fragment, keeps its own."""
    state = current_state()
    prompt = state.request.prompt if state.request is not None else None
    components.sync_url(session.page_query(state, prompt=prompt), key=key)


# --- settings -----------------------------------------------------------------------------------


def _on_settings(template: bool) -> None:
    ss, state = st.session_state, current_state()
    settings = replace(
        state.settings,
        max_new_tokens=int(ss[Generate.MAX_NEW]),
        decoding=ss[Generate.DECODING],
        temperature=float(ss[Generate.TEMPERATURE]),
        top_k=int(ss[Generate.TOP_K]),
        top_p=float(ss[Generate.TOP_P]),
        seed=int(ss[Generate.SEED]),
    )
    if template:  # a disabled toggle shows "off"; it must not switch chat off for later models
        settings = replace(settings, chat=bool(ss[Generate.CHAT]))
    save(gs.with_settings(state, settings))


def _on_generate(template: bool, spec: AllowedSpec, new_seed: bool) -> None:
    state = current_state()
    if new_seed:
        state = gs.reseed(state, secrets.randbits(31))
    state = gs.ask(state, session.current_prompt(), template, spec)
    save(state)
    assert state.request is not None
    key = GenerationKey(spec, state.request.prompt, state.request.settings)
    job_view.start_again(key)


def settings_form(model: ModelHandle) -> None:
    """How the model writes: length, greedy or sampled (temperature, top-k, top-p, seed), chat
    template; the templated prompt; Generate."""
    state, template = current_state(), has_template(model)
    s, ss = state.settings, st.session_state
    seed_widgets(
        {
            Generate.MAX_NEW: s.max_new_tokens,
            Generate.DECODING: s.decoding,
            Generate.TEMPERATURE: float(s.temperature),
            Generate.TOP_K: int(s.top_k or 0),
            Generate.TOP_P: float(s.top_p),
            Generate.SEED: int(s.seed or 0),
            Generate.CHAT: s.chat and template,
        }
    )
    live: dict[str, Any] = {"on_change": _on_settings, "args": (template,)}
    sampler: dict[str, Any] = {**live, "disabled": s.decoding == "greedy"}
    c = st.columns([1.3, 1.9, 1, 1, 1, 1.2])
    c[0].number_input("New tokens (at most)", 1, MAX_NEW_TOKENS, key=Generate.MAX_NEW, **live)
    c[1].radio(
        "Decoding",
        DECODINGS,
        key=Generate.DECODING,
        horizontal=True,
        format_func=DECODING_LABELS.__getitem__,
        **live,
    )
    c[2].number_input(
        "Temperature", 0.0, gs.MAX_TEMPERATURE, step=0.1, key=Generate.TEMPERATURE, **sampler
    )
    c[3].number_input("Top-k (0: all)", 0, gs.MAX_TOP_K, key=Generate.TOP_K, **sampler)
    c[4].number_input("Top-p", 0.0, 1.0, step=0.05, key=Generate.TOP_P, **sampler)
    c[5].number_input("Seed", 0, gs.MAX_SEED, key=Generate.SEED, **sampler)
    why = (
        "Instruct models (SmolLM2-Instruct) answer a user turn written in their chat template."
        if template
        else f"{md(model.facts.name)} has no chat template: the prompt is continued as plain text."
    )
    st.toggle(
        "Wrap the prompt in the model's chat template",
        key=Generate.CHAT,
        disabled=not template,
        help=why,
        **live,
    )
    templated(model, ss[Generate.CHAT])
    spec = session.allowed_spec(model)
    b = st.container(horizontal=True)
    b.button(
        "Generate" + price(model, spec, gs.effective(current_state().settings, template)),
        key=Generate.GO,
        type="primary",
        on_click=_on_generate,
        args=(template, spec, False),
    )
    b.button(
        "Sample with a new seed",
        key=Generate.NEW_SEED,
        on_click=_on_generate,
        args=(template, spec, True),
    )


def estimate(model: ModelHandle, n_prompt: int, n_new: int) -> Cost:
    """What writing ``n_new`` tokens after an ``n_prompt``-token prompt costs on ``model``."""
    return generation_estimate(
        model.facts,
        n_prompt,
        n_new,
        model.spec.device,
        model.spec.torch_dtype.itemsize,
        int(getattr(model.tokenizer, "vocab_size", 50_000) or 50_000),
    )


def price(model: ModelHandle, spec: AllowedSpec, settings: GenerationSettings) -> str:
    """`` (up to 32 tokens, about 2 s)``: what Generate will cost with these settings (as the
    request will hold them), at this server's rate for generation ("" while the prompt cannot
    be written after)."""
    prompt = session.current_prompt()
    try:
        n_prompt = prepare_prompt(model, prompt, settings.chat).n_full
        check(model, settings, n_prompt)
    except UserError:
        return ""
    n_new = settings.max_new_tokens
    cost = estimate(model, n_prompt, n_new)
    seconds = job_view.expected_seconds(GenerationKey(spec, prompt, settings), cost)
    return f" (up to {n_new:,} tokens, {job_view.about(seconds)})"


def templated(model: ModelHandle, chat: bool) -> None:
    """The sidebar's prompt as the model reads it through its chat template."""
    prompt = session.current_prompt()
    if not chat or not prompt.strip():
        return
    try:
        text = chat_text(model, prompt)
    except UserError as err:
        session.show_error(err)
        return
    with st.expander("The prompt as the model reads it (its chat template)"):
        st.code(text, language=None, wrap_lines=True)


# --- the generation as a job --------------------------------------------------------------------


def generation(model: ModelHandle) -> tuple[GenerationKey, Generation] | None:
    """The generation asked for, streamed while it runs (None: nothing to show yet)."""
    state = current_state()
    if not model.facts.causal:  # an encoder: say why at once, not after Generate
        try:
            check(model, state.settings, 0)
        except UserError as err:
            session.show_error(err)
        return None
    spec = session.allowed_spec(model)
    if state.pending:
        state = gs.ask(state, session.current_prompt(), has_template(model), spec)
        save(state)
    request = state.request
    if request is None or request.model != spec:
        st.info("Press **Generate** to let the model continue the sidebar's prompt.")
        return None
    key = request_key(model, request)
    try:
        prompt = prepare_prompt(model, request.prompt, request.settings.chat)
        check(model, request.settings, prompt.n_full)
        facts, n_new = model.facts, request.settings.max_new_tokens
        cost = estimate(model, prompt.n_full, n_new)
        partial = Partial()  # the work writes the text so far here; the progress panel shows it
        found = job_view.run_job(
            key,
            f"Writing up to {n_new:,} tokens after a {prompt.n_full:,}-token prompt with "
            f"{facts.name}",
            lambda progress: job_work.streamed_generation(
                model, request.prompt, request.settings, progress, partial
            ),
            cost=cost,
            partial=partial,
        )
    except UserError as err:
        session.show_error(err)
        return None
    if found is job_view.MISSING:
        return None
    if request.prompt != session.current_prompt():
        st.caption("Written after an earlier prompt; press **Generate** for the sidebar's.")
    return key, found
