"""The Generate page's state as one frozen value, and every way it changes, as pure functions.

:class:`GenerateState` holds what the visitor set (how the model writes, the eviction
experiment's settings and pasted text), what they asked to run (:class:`Request`,
:class:`SweepRequest`: a run starts only when asked, or when a link asks for it) and what they
look at (the step and the head). Widgets only display it; their callbacks replace it through the
transitions below. No Streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal, get_args

import numpy as np

from models.generate.policies import Policy
from models.generate.settings import MAX_NEW_TOKENS, GenerationSettings
from models.generate.sweep import DEFAULT_POLICIES, EvictionSettings
from models.head import Head
from ui.runtime.policy import AllowedSpec

TextSource = Literal["passage", "prompt", "pasted"]
TEXT_SOURCES: tuple[TextSource, ...] = get_args(TextSource)
MAX_TEMPERATURE = 10.0
MAX_TOP_K = 100_000
MAX_SEED = 2**31 - 1
MAX_SINKS = 64
BUDGET_CHOICES = tuple(2**p for p in range(3, 14))  # 8 .. 8192
DEFAULT_SETTINGS = GenerationSettings(max_new_tokens=32, chat=True, seed=0)


@dataclass(frozen=True)
class Request:
    """A generation the visitor asked for: the prompt then, the settings as they run, and the
    model it was asked of (an opaque key: another model needs a new request)."""

    prompt: str
    settings: GenerationSettings
    model: AllowedSpec | None = None


@dataclass(frozen=True)
class SweepRequest:
    """An eviction experiment the visitor asked for: the text and the sweep's settings."""

    text: str
    settings: EvictionSettings


@dataclass(frozen=True)
class EvictionChoice:
    """The eviction experiment's widgets: which text, the budgets, sinks, policies, length."""

    source: TextSource = "passage"
    pasted: str = ""
    budgets: tuple[int, ...] = ()  # empty: suggested for the text's length
    sinks: int = 4
    policies: tuple[Policy, ...] = DEFAULT_POLICIES
    max_tokens: int = 1024


@dataclass(frozen=True)
class GenerateState:
    """What the Generate page shows (see the module docstring).

    Attributes:
        settings: the widgets' settings (``seed`` always a number; ``chat`` applies only to a
            model with a chat template).
        request: the generation asked for (None: nothing yet).
        pending: a link asked for a generation; it starts once the page knows the model.
        step: the step looked at; None follows the newest.
        head: the head looked at; None until a generation picks one.
        eviction: the experiment's settings; ``sweep`` the run asked for.

    Its link carries every field but the runs themselves: a link to a shown generation sets
    ``pending``, so opening it writes the same text again; the eviction experiment waits to be
    asked.
    """

    IN_SESSION: ClassVar[frozenset[str]] = frozenset({"request", "sweep"})

    settings: GenerationSettings = DEFAULT_SETTINGS
    request: Request | None = None
    pending: bool = False
    step: int | None = None
    head: Head | None = None
    eviction: EvictionChoice = EvictionChoice()
    sweep: SweepRequest | None = None


# --- settings and requests --------------------------------------------------------------------


def effective(settings: GenerationSettings, has_template: bool) -> GenerationSettings:
    """The settings as they run: greedy ignores the sampler's settings, and chat needs a model
    with a chat template (so two requests that write the same text have the same key)."""
    out = replace(settings, chat=settings.chat and has_template)
    if not out.sampling:
        out = replace(out, temperature=1.0, top_k=None, top_p=1.0, seed=None)
    elif not out.top_k:
        out = replace(out, top_k=None)
    return out


def with_settings(state: GenerateState, settings: GenerationSettings) -> GenerateState:
    """New widget values for the settings (checked when a generation is asked for)."""
    return replace(state, settings=settings)


def ask(
    state: GenerateState, prompt: str, has_template: bool, model: AllowedSpec | None = None
) -> GenerateState:
    """Ask ``model`` for a generation of ``prompt`` with the current settings; the view follows
    the new text."""
    request = Request(prompt, effective(state.settings, has_template), model)
    return replace(state, request=request, pending=False, step=None)


def reseed(state: GenerateState, seed: int) -> GenerateState:
    """A new seed for sampling (the page draws it; this stays pure)."""
    settings = replace(state.settings, seed=int(seed) % (MAX_SEED + 1), decoding="sample")
    return with_settings(state, settings)


# --- what is looked at ------------------------------------------------------------------------


def shown_step(state: GenerateState, n_steps: int) -> int:
    """The step shown: the chosen one inside the generation, else the newest."""
    if state.step is None:
        return max(n_steps - 1, 0)
    return min(max(state.step, 0), max(n_steps - 1, 0))


def choose_step(state: GenerateState, step: int, n_steps: int) -> GenerateState:
    return replace(state, step=min(max(int(step), 0), max(n_steps - 1, 0)))


def _fit(head: Head, n_layers: int, n_heads: int) -> Head:
    return Head(min(max(head.layer, 0), n_layers - 1), min(max(head.index, 0), n_heads - 1))


def choose_head(state: GenerateState, head: Head, n_layers: int, n_heads: int) -> GenerateState:
    return replace(state, head=_fit(head, n_layers, n_heads))


def shown_head(state: GenerateState, sink: np.ndarray) -> Head:
    """The head shown: the chosen one, else the one that looks least at position 0 over the
    steps (``sink``: ``step layer head_index``), where attention is most about the text."""
    n_layers, n_heads = sink.shape[1:]
    if state.head is not None:
        return _fit(state.head, n_layers, n_heads)
    layer, index = np.unravel_index(int(np.argmin(sink.mean(axis=0))), (n_layers, n_heads))
    return Head(int(layer), int(index))


# --- the eviction experiment ------------------------------------------------------------------


def with_eviction(state: GenerateState, choice: EvictionChoice) -> GenerateState:
    """New widget values for the eviction experiment (checked when a sweep is asked for)."""
    return replace(state, eviction=choice)


def suggested_budgets(n_tokens: int) -> tuple[int, ...]:
    """Up to four powers of two below the text's length (at least 16): 64..512 for 1,024."""
    below = [b for b in BUDGET_CHOICES if 16 <= b < n_tokens]
    return tuple(below[-4:]) or (min(8, max(n_tokens - 1, 1)),)


def eviction_settings(choice: EvictionChoice, n_tokens: int) -> EvictionSettings:
    """The sweep's settings for a text of ``n_tokens`` tokens (after the cut)."""
    budgets = tuple(sorted(set(choice.budgets))) or suggested_budgets(n_tokens)
    return EvictionSettings(
        budgets=budgets,
        sinks=int(choice.sinks),
        policies=tuple(choice.policies),
        max_tokens=int(choice.max_tokens),
    )


def ask_sweep(state: GenerateState, text: str, n_tokens: int) -> GenerateState:
    """Ask for the eviction experiment on ``text`` with the current settings."""
    return replace(state, sweep=SweepRequest(text, eviction_settings(state.eviction, n_tokens)))


# --- the widgets' ranges -------------------------------------------------------------------

# Each number's range on the page (a widget cannot show a value outside its range).
_RANGES: dict[str, tuple[float, float]] = {
    "max_new_tokens": (1, MAX_NEW_TOKENS),
    "temperature": (0.0, MAX_TEMPERATURE),
    "top_k": (0, MAX_TOP_K),
    "top_p": (0.0, 1.0),
    "seed": (0, MAX_SEED),
}


def fit_settings(settings: GenerationSettings) -> tuple[GenerationSettings, list[str]]:
    """Settings a link asked for, with numbers brought into the page's ranges (a note for each)
    and no top-k or seed written as 0 and a seed always set, so the page and its link agree on
    the text. What cannot run, such as a temperature of 0 with sampling, is kept for the page
    to refuse in the generation's own words."""
    notes: list[str] = []
    fixed: dict[str, Any] = {}
    for name, (low, high) in _RANGES.items():
        value = getattr(settings, name)
        if value is None or low <= value <= high:
            continue
        fixed[name] = type(value)(min(max(value, low), high))
        notes.append(
            f"The link asked for {name.replace('_', ' ')} {value:g}, outside {low:g} to "
            f"{high:g}; using {fixed[name]:g}."
        )
    settings = replace(settings, **fixed)
    return replace(settings, top_k=settings.top_k or None, seed=settings.seed or 0), notes
