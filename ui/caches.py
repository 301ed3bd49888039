"""Every Streamlit cache of the app, in one place.

One memory policy: a model is only ever booted through :func:`models.model.loading.load`, which
reads its configuration, counts its parameters and refuses it when it does not fit before any
weight is read. Cached values never hold a model or an ActivationCache except :func:`model`
itself; every other entry is arrays and plain values keyed by everything that changes them
(the model spec, the prompt, the settings).
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from models.attention.check import KernelReport, check_kernel
from models.capture.run import AttentionRun, capture
from models.capture.views import pooled_layer
from models.classroom.real import LayerActivations, layer_activations
from models.heads import corpus as heads_corpus
from models.heads import induction, scores
from models.heads.store import ResultStore
from models.model.loading import LoadedModel, load
from models.model.spec import ModelSpec
from models.scaling import capture as scaling_capture
from models.scaling.maths import SweepStats, SyntheticPanel, sweep, synthetic_panel
from viz.thumbnails import data_uri, pooled_png

THUMB = 72
SCALING_MAX_TOKENS = 256
KERNEL_MAX_TOKENS = 256


@st.cache_resource(max_entries=3, show_spinner=False)
def model(spec: ModelSpec) -> LoadedModel:
    """One loaded model per spec, shared by every session (forward passes take its lock)."""
    return load(spec)


@st.cache_resource(max_entries=16, show_spinner=False)
def run(spec: ModelSpec, prompt: str) -> AttentionRun:
    """Patterns of ``prompt`` on ``spec``, cached per (spec, prompt).

    A resource cache, not a data cache: a long prompt's run holds a hundred megabytes of q and k,
    which ``st.cache_data`` would copy on every rerun. Runs are frozen and their arrays
    read-only, so sharing one object between sessions is safe.
    """
    return capture(model(spec), prompt)


@st.cache_data(max_entries=16, show_spinner=False)
def thumbnails(spec: ModelSpec, prompt: str) -> list[dict]:
    """Every head's pooled pattern as a PNG data URI, ``{"id": "L.H", "src": ...}``."""
    captured = run(spec, prompt)
    cells = []
    for layer in range(captured.facts.n_layers):
        pooled = pooled_layer(captured, layer, THUMB)
        cells += [{"id": f"{layer}.{head}", "src": data_uri(pooled_png(pooled[head], THUMB))}
                  for head in range(captured.facts.n_heads)]
    return cells


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
def bundled_corpus(spec: ModelSpec) -> heads_corpus.Corpus:
    """The model's bundled corpus (rebuilding the bundled model's held-out split reads the
    standard library once: a few seconds)."""
    return heads_corpus.default_corpus(model(spec))
