"""The Generate page's state as a value: every transition checked directly, without AppTest."""

from dataclasses import replace

import numpy as np

from models.head import Head
from ui.state import generate as gs
from ui.state.generate import GenerateState, Request


def test_greedy_requests_ignore_the_samplers_settings():
    """Two greedy requests that write the same text have the same settings (one job key)."""
    a = gs.with_settings(
        GenerateState(),
        replace(GenerateState().settings, decoding="greedy", temperature=0.3, top_k=5, seed=9),
    )
    b = gs.with_settings(
        GenerateState(),
        replace(GenerateState().settings, decoding="greedy", temperature=2.0, top_p=0.5, seed=1),
    )
    assert gs.ask(a, "x", True).request == gs.ask(b, "x", True).request
    assert gs.ask(a, "x", True).request.settings.seed is None


def test_sampled_requests_keep_their_seed_and_top_k_zero_means_off():
    state = gs.with_settings(
        GenerateState(),
        replace(GenerateState().settings, decoding="sample", temperature=0.7, top_k=0, seed=42),
    )
    settings = gs.ask(state, "x", False).request.settings
    assert (settings.seed, settings.temperature, settings.top_k) == (42, 0.7, None)


def test_chat_applies_only_to_a_model_with_a_template():
    state = GenerateState()  # chat on by default: instruct models answer in their template
    assert gs.ask(state, "hi", True).request.settings.chat
    assert not gs.ask(state, "hi", False).request.settings.chat
    assert state.settings.chat  # kept for the next model that has one


def test_asking_follows_the_new_text_and_keeps_the_head():
    state = replace(GenerateState(), step=5, head=Head(2, 1))
    asked = gs.ask(state, "prompt", True, model="spec")
    assert asked.request == Request("prompt", gs.effective(state.settings, True), "spec")
    assert asked.step is None and asked.head == Head(2, 1) and not asked.pending


def test_reseed_switches_to_sampling_with_the_new_seed():
    state = gs.reseed(GenerateState(), 2**40 + 5)
    assert state.settings.sampling and 0 <= state.settings.seed <= gs.MAX_SEED


def test_the_shown_step_follows_the_newest_until_one_is_chosen():
    state = GenerateState()
    assert gs.shown_step(state, 10) == 9
    chosen = gs.choose_step(state, 3, 10)
    assert gs.shown_step(chosen, 10) == 3
    assert gs.shown_step(chosen, 2) == 1  # a shorter generation: clamped
    assert gs.choose_step(state, -4, 10).step == 0 and gs.choose_step(state, 99, 10).step == 9


def test_the_shown_head_is_chosen_or_the_one_that_looks_least_at_position_0():
    sink = np.full((4, 3, 2), 0.9)  # step layer head
    sink[:, 2, 1] = 0.1
    assert gs.shown_head(GenerateState(), sink) == Head(2, 1)
    assert gs.shown_head(replace(GenerateState(), head=Head(0, 1)), sink) == Head(0, 1)
    assert gs.shown_head(replace(GenerateState(), head=Head(9, 9)), sink) == Head(2, 1)
    assert gs.choose_head(GenerateState(), Head(7, -1), 3, 2).head == Head(2, 0)


def test_suggested_budgets_are_powers_of_two_below_the_length():
    assert gs.suggested_budgets(1024) == (64, 128, 256, 512)
    assert gs.suggested_budgets(128) == (16, 32, 64)
    assert gs.suggested_budgets(10) == (8,)
    assert gs.suggested_budgets(3) == (2,)


def test_eviction_settings_and_request():
    choice = gs.EvictionChoice(budgets=(256, 64, 64), sinks=2, policies=("window",), max_tokens=512)
    state = gs.with_eviction(GenerateState(), choice)
    settings = gs.eviction_settings(state.eviction, 512)
    assert settings.budgets == (64, 256) and settings.sinks == 2
    assert settings.policies == ("window",) and settings.max_tokens == 512
    suggested = gs.eviction_settings(GenerateState().eviction, 128)
    assert suggested.budgets == (16, 32, 64)
    asked = gs.ask_sweep(state, "some text", 512)
    assert asked.sweep == gs.SweepRequest("some text", settings)
