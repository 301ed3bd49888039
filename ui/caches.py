"""Every Streamlit cache of the app, in one place.

One memory policy: a model is only ever booted through :func:`models.model.loading.load`, which
reads its configuration, counts its parameters and refuses it when it does not fit before any
weight is read; loaded models and heavy results are held in bounded stores that a janitor thread
empties of what nobody used lately. Cached values never hold a model or an ActivationCache except
:func:`model` itself; every other entry is arrays and plain values keyed by everything that
changes them (the model spec, the prompt, the settings).
"""

from __future__ import annotations

import os

import numpy as np
import streamlit as st

from models.attention.check import KernelReport, check_kernel
from models.capture.run import AttentionRun, capture
from models.capture.views import head_overview, pooled_layer, strongest_sink
from models.capture.weighted import ValueWeighting, value_weighting
from models.circuits.presets import presets
from models.circuits.value_weighted import value_norms
from models.circuits.task import CircuitTask
from models.classroom.real import LayerActivations, layer_activations
from models.heads import corpus as heads_corpus
from models.heads import induction, scores
from models.heads.store import ResultStore
from models.model.loading import LoadedModel, load
from models.model.spec import ModelSpec
from models.scaling import capture as scaling_capture
from models.scaling.maths import SweepStats, SyntheticPanel, sweep, synthetic_panel
from ui import policy
from ui.jobs import POOL, Janitor
from viz.thumbnails import data_uri, pooled_png

THUMB = 64
OVERVIEW = 256
SCALING_MAX_TOKENS = 256
KERNEL_MAX_TOKENS = 256


MODEL_BYTES = int(float(os.environ.get("ATLAS_MODEL_MB", "8192")) * 1024**2)
MODELS = ResultStore(max_entries=3, max_bytes=MODEL_BYTES)
JANITOR = Janitor([MODELS, POOL.results], busy=POOL.busy)
JANITOR.start()


def model(spec: ModelSpec) -> LoadedModel:
    """One loaded model per spec, shared by every session (forward passes take its lock).

    At most three models and ``ATLAS_MODEL_MB`` of weights stay loaded (the least recently
    used goes first), and a model nobody used for ``ATLAS_IDLE_S`` seconds is dropped and its
    memory returned to the system.
    """
    return MODELS.get_or_compute(spec, lambda: load(spec))


def run_key(spec: ModelSpec, prompt: str, max_tokens: int | None = None) -> tuple:
    return ("run", spec, prompt, max_tokens)


def run(spec: ModelSpec, prompt: str) -> AttentionRun:
    """Patterns of ``prompt`` on ``spec``, shared by every session.

    Runs live in the heavy-work pool's result store (bounded in bytes: a long prompt's run holds
    a hundred megabytes of q and k), where :func:`app_state.active_run` puts them through a job
    with progress. A run asked for here that is not stored is captured in place. Runs are frozen
    and their arrays read-only, so sharing one object between sessions is safe.
    """
    cap = policy.max_prompt_tokens()
    return POOL.results.get_or_compute(run_key(spec, prompt, cap),
                                       lambda: capture(model(spec), prompt, max_tokens=cap))


def weighting_key(spec: ModelSpec, prompt: str) -> tuple:
    return ("value-weighting", spec, prompt, policy.max_prompt_tokens())


def weighting_work(spec: ModelSpec, prompt: str):
    """The job that computes a run's value weighting (norms from the capture when it has them,
    else from one pass over the v hooks)."""
    def work(progress):
        captured = run(spec, prompt)
        norms = getattr(captured.store, "value_norms", None)
        if norms is None:
            import torch
            norms = value_norms(model(spec), torch.tensor([captured.token_ids]))
        return value_weighting(captured, norms, THUMB, progress)
    return work


def weighting(spec: ModelSpec, prompt: str) -> ValueWeighting:
    """The value weighting of ``prompt`` on ``spec`` (from the job's results, or computed)."""
    return POOL.results.get_or_compute(weighting_key(spec, prompt),
                                       lambda: weighting_work(spec, prompt)(lambda f, t: None))


@st.cache_data(max_entries=16, show_spinner=False)
def thumbnails(spec: ModelSpec, prompt: str, normalise: bool = True,
               weighted: bool = False) -> list[dict]:
    """Every head's max-pooled pattern as a PNG data URI, ``{"id": "L.H", "src": ...}``
    (value-weighted patterns when ``weighted``)."""
    captured = run(spec, prompt)
    cells = []
    for layer in range(captured.facts.n_layers):
        pooled = (weighting(spec, prompt).pooled[layer] if weighted
                  else pooled_layer(captured, layer, THUMB))
        cells += [{"id": f"{layer}.{head}",
                   "src": data_uri(pooled_png(pooled[head], THUMB, normalise=normalise))}
                  for head in range(captured.facts.n_heads)]
    return cells


@st.cache_data(max_entries=256, show_spinner=False)
def sink_key(spec: ModelSpec, prompt: str, layer: int, head: int) -> int:
    """The key position head ``layer.head`` sinks most weight into (see ``strongest_sink``)."""
    return strongest_sink(run(spec, prompt), layer, head)


@st.cache_data(max_entries=64, show_spinner=False)
def overview_png(spec: ModelSpec, prompt: str, layer: int, head: int, normalise: bool,
                 weighted: bool = False) -> str:
    """One head's whole pattern, max-pooled to at most 256 pixels, as a PNG data URI."""
    pooled = head_overview(run(spec, prompt), layer, head, OVERVIEW,
                           weighting(spec, prompt) if weighted else None)
    return data_uri(pooled_png(pooled, OVERVIEW, normalise=normalise))


@st.cache_data(max_entries=32, show_spinner=False)
def repeated_scores(spec: ModelSpec, seq_len: int, batch: int, seed: int
                    ) -> induction.RepeatedScores:
    return induction.measure_repeated(model(spec), seq_len, batch, seed)


@st.cache_data(max_entries=64, show_spinner=False)
def prompt_scores(spec: ModelSpec, prompt: str) -> scores.PromptScores:
    return scores.run_scores(run(spec, prompt))


@st.cache_resource(max_entries=1, show_spinner=False)
def finished_work() -> ResultStore:
    """Finished long results per (model, text, settings); interrupted work stores nothing."""
    return ResultStore(max_entries=24)


@st.cache_data(max_entries=16, show_spinner=False)
def logits(spec: ModelSpec, prompt: str) -> scaling_capture.ScoreCapture:
    return scaling_capture.capture_scores(model(spec), prompt, SCALING_MAX_TOKENS)


@st.cache_data(max_entries=32, show_spinner=False)
def scaling_sweep(spec: ModelSpec, prompt: str, factors: tuple[float, ...]) -> SweepStats:
    return sweep(logits(spec, prompt).scores, np.asarray(factors))


@st.cache_data(max_entries=2048, show_spinner=False)
def loss_at_factor(spec: ModelSpec, prompt: str, factor: float) -> scaling_capture.FactorLoss:
    return scaling_capture.loss_at(model(spec), prompt, factor, SCALING_MAX_TOKENS)


@st.cache_data(max_entries=8, show_spinner=False)
def synthetic(seed: int) -> SyntheticPanel:
    return synthetic_panel(seed=seed)


@st.cache_data(max_entries=4, show_spinner=False)
def kernel_report(spec: ModelSpec, prompt: str, dtype: str) -> KernelReport:
    """Kernel vs model on every head, cached per (model spec, prompt, kernel dtype)."""
    return check_kernel(model(spec), prompt, max_tokens=KERNEL_MAX_TOKENS, dtype=dtype)


@st.cache_data(max_entries=16, show_spinner=False)
def layer_acts(spec: ModelSpec, prompt: str, layer: int) -> LayerActivations:
    """One layer's q, k, v, scores, pattern and z, cached per (model, prompt, layer)."""
    return layer_activations(model(spec), prompt, layer)


@st.cache_data(max_entries=8, show_spinner=False)
def circuit_presets(spec: ModelSpec) -> dict[str, CircuitTask]:
    """The circuits page's ready-made tasks for ``spec`` (words drawn from its vocabulary)."""
    return presets(model(spec))


@st.cache_data(max_entries=8, show_spinner=False)
def bundled_corpus(spec: ModelSpec) -> heads_corpus.Corpus:
    """The model's bundled corpus (rebuilding the bundled model's held-out split reads the
    standard library once: a few seconds)."""
    return heads_corpus.default_corpus(model(spec))
