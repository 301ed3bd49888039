"""The Generate page's state as a value: every transition checked directly, without AppTest."""

from dataclasses import replace

import numpy as np
import pytest

from models.generate.settings import MAX_NEW_TOKENS, GenerationSettings
from models.head import Head
from ui.state import generate as gs
from ui.state.generate import GenerateState, Request


def test_greedy_requests_ignore_the_samplers_settings():
    """Two greedy requests that write the same text have the same settings (one job key)."""
    a = gs.edit(GenerateState(), decoding="greedy", temperature=0.3, top_k=5, seed=9)
    b = gs.edit(GenerateState(), decoding="greedy", temperature=2.0, top_p=0.5, seed=1)
    assert gs.ask(a, "x", True).request == gs.ask(b, "x", True).request
    assert gs.ask(a, "x", True).request.settings.seed is None


def test_sampled_requests_keep_their_seed_and_top_k_zero_means_off():
    state = gs.edit(GenerateState(), decoding="sample", temperature=0.7, top_k=0, seed=42)
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


@pytest.mark.parametrize(
    "settings",
    [
        GenerationSettings(max_new_tokens=32, chat=True),
        GenerationSettings(
            max_new_tokens=7, decoding="sample", temperature=0.8, top_k=50, top_p=0.95, seed=123456
        ),
        GenerationSettings(max_new_tokens=1, decoding="sample", temperature=0.25, seed=0),
    ],
)
def test_link_params_round_trip(settings):
    parsed, notes = gs.parse_link(gs.link_params(settings))
    assert not notes
    assert gs.effective(parsed, True) == gs.effective(settings, True)


def test_link_params_spell_the_settings_as_the_core_does():
    sampled = GenerationSettings(
        max_new_tokens=40, decoding="sample", temperature=0.8, top_k=50, top_p=0.95, seed=7
    )
    assert dict(gs.link_params(sampled)) == {
        "n": "40",
        "chat": "0",
        "decoding": "sample",
        "temp": "0.8",
        "top_k": "50",
        "top_p": "0.95",
        "seed": "7",
    }


def test_garbage_in_a_link_becomes_notes_and_numbers_fit_the_widgets():
    link = (
        ("n", "99999"),
        ("decoding", "sample"),
        ("temp", "x"),
        ("top_k", "-3"),
        ("top_p", "7"),
        ("seed", "7"),
    )
    settings, notes = gs.parse_link(link)
    assert settings.max_new_tokens == MAX_NEW_TOKENS and settings.sampling
    assert settings.seed == 7 and settings.temperature == 1.0 and settings.top_k is None
    assert settings.top_p == 1.0 and len(notes) == 4
    assert any("99999" in n for n in notes) and any("temp='x'" in n for n in notes)


def test_a_zero_temperature_in_a_link_is_kept_for_the_page_to_refuse():
    settings, notes = gs.parse_link((("decoding", "sample"), ("temp", "0")))
    assert not notes and settings.temperature == 0.0 and settings.seed == 0
    assert settings.problems()  # the page says why, in the generation's own words


def test_a_link_with_settings_asks_for_a_generation_once_the_model_is_known():
    link = (("n", "6"), ("chat", "0"), ("decoding", "sample"), ("temp", "0.9"), ("seed", "3"))
    state, notes = gs.from_link(link, layer=1, head=2)
    assert state.pending and state.head == Head(1, 2) and not notes
    assert state.settings.max_new_tokens == 6 and not state.settings.chat
    plain, _ = gs.from_link(None, 0, 0)
    assert not plain.pending and plain.head is None and plain.request is None


def test_suggested_budgets_are_powers_of_two_below_the_length():
    assert gs.suggested_budgets(1024) == (64, 128, 256, 512)
    assert gs.suggested_budgets(128) == (16, 32, 64)
    assert gs.suggested_budgets(10) == (8,)
    assert gs.suggested_budgets(3) == (2,)


def test_eviction_settings_and_request():
    state = gs.edit_eviction(
        GenerateState(), budgets=(256, 64, 64), sinks=2, policies=("window",), max_tokens=512
    )
    settings = gs.eviction_settings(state.eviction, 512)
    assert settings.budgets == (64, 256) and settings.sinks == 2
    assert settings.policies == ("window",) and settings.max_tokens == 512
    suggested = gs.eviction_settings(GenerateState().eviction, 128)
    assert suggested.budgets == (16, 32, 64)
    asked = gs.ask_sweep(state, "some text", 512)
    assert asked.sweep == gs.SweepRequest("some text", settings)
