"""What the explorer draws from a run, each kept in the server's stores under a typed key: the
run itself (captured again through the pool if the store let it go), its value weighting, the
grid's pictures and marks, one head's overview, its strongest sink and the prompt's words.
Views whose work grows with the prompt (the marks, the overview, the sink) run as jobs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from models.capture.overview import OVERVIEW, THUMB
from models.capture.precision import (
    PatternDifference,
    difference_cost,
    difference_rows,
    pattern_difference,
)
from models.capture.run import AttentionRun
from models.capture.views import (
    overview_cost,
    pooled_layer,
    pooled_signed,
    strongest_sink,
    strongest_sink_cost,
)
from models.capture.weighted import ValueWeighting
from models.capture.words import Words
from models.cost import Cost
from models.head import Head
from models.heads.finding.prompt_scores import head_marks, prompt_scores, scores_cost
from models.heads.table import Thresholds
from models.model.forward import tokenize
from models.progress import Progress
from ui import session
from ui.runtime import job_work, server
from ui.runtime.job_keys import (
    HeadMarksKey,
    OverviewKey,
    PrecisionKey,
    RunKey,
    SinkKey,
    ThumbnailsKey,
    WeightingKey,
    WordsKey,
)
from ui.runtime.jobs import Work
from ui.widgets import job_view
from viz.thumbnails import PIXEL_BYTES, data_uri, pooled_pngs, signed_pngs

MARK_WORDS = {"I": "induction", "P": "previous token", "S": "sink (first token)"}
MARKS_NOTE = (
    "Letters mark what this prompt's own attention shows: **I** induction (over 0.4 on the "
    "token after a repeated pair's earlier copy), **P** previous token (over 0.4), **S** a "
    "sink head (80 % or more on the first token). The head finder measures these over a corpus."
)


def run_or_recapture(key: RunKey) -> AttentionRun | None:
    """The run for ``key``; one the store dropped is captured again as a job with progress
    (None while that runs)."""
    runtime = server.current()
    found = runtime.results.get(key)
    if found is not None:
        return found
    model = runtime.models.get(key.spec)
    n = int(tokenize(model, key.prompt, key.max_tokens)[0].shape[1])
    run = job_view.run_job(
        key,
        f"Reading the attention of {n:,} tokens again (the server had let it go)",
        session.capture_work(model, key),
        cost=session.capture_cost(model, n),
    )
    return None if run is job_view.MISSING else run


def _run(key: RunKey) -> AttentionRun:
    found = server.current().results.get(key)
    if found is None:
        raise LookupError("the run is no longer stored")
    return found


def weighting_work(key: RunKey) -> Work[ValueWeighting]:
    """The job that computes a run's value weighting (norms from the capture when it has
    them, else from one pass over the v hooks)."""

    def work(progress: Progress) -> ValueWeighting:
        return job_work.weighting_of(server.current().models.get(key.spec), _run(key), progress)

    return work


def weighting(key: RunKey) -> ValueWeighting | None:
    return server.current().results.get(WeightingKey(key))


def thumbnails(key: RunKey, weighted: bool) -> list[dict[str, str]]:
    """Every head's max-pooled pattern as a PNG data URI, ``{"id": "L.H", "src": ...}``; a
    linear-attention layer's signed mixing matrix on the signed scale (never value-weighted).
    Each layer fills :attr:`AttentionRun.grid_heads` cells: a layer with fewer heads than the
    widest ends in cells with no picture, ``{"id": "L.H", "none": why}``."""

    def build() -> list[dict[str, str]]:
        run, weights = _run(key), weighting(key) if weighted else None
        cells = []
        width = run.grid_heads
        for layer in range(run.facts.n_layers):
            if run.signed(layer):
                pictures = signed_pngs(pooled_signed(run, layer, THUMB), THUMB)
            else:
                pooled = (
                    weights.pooled[layer]
                    if weights is not None
                    else pooled_layer(run, layer, THUMB)
                )
                pictures = pooled_pngs(pooled, THUMB, normalise=True)
            cells += [
                {"id": str(Head(layer, h)), "src": data_uri(png)} for h, png in enumerate(pictures)
            ]
            none = f"layer {layer} has {len(pictures)} heads"
            cells += [
                {"id": str(Head(layer, h)), "none": none} for h in range(len(pictures), width)
            ]
        return cells

    return server.current().derived.get_or_compute(ThumbnailsKey(key, weighted), build)


def marks(key: RunKey) -> dict[Head, str] | job_view.Pending:
    """The letters this prompt's own scores put on each head's picture (see
    :mod:`models.heads.finding.prompt_scores`): a job, ``MISSING`` while it runs."""
    return job_view.run_job(
        HeadMarksKey(key),
        "Scoring every head on this prompt",
        lambda progress: head_marks(prompt_scores(_run(key)), Thresholds()),
        cost=scores_cost(_run(key)),
    )


def held_marks(key: RunKey) -> dict[Head, str]:
    """The marks if they have been computed (an export uses what the page showed)."""
    return server.current().results.get(HeadMarksKey(key)) or {}


def marked(cells: list[dict[str, str]], found: dict[Head, str]) -> list[dict[str, str]]:
    """Copies of the grid's cells, each marked head with its letters (``badge``) and a tooltip
    that spells them out."""
    shown = {str(head): letters for head, letters in found.items()}
    out = []
    for cell in cells:
        letters = shown.get(cell["id"])
        if letters:
            words = ", ".join(MARK_WORDS[letter] for letter in letters)
            cell = {**cell, "badge": letters, "title": f"head {cell['id']}: {words}"}
        out.append(cell)
    return out


def overview_png(key: RunKey, head: Head, weighted: bool) -> str | job_view.Pending:
    """One head's whole pattern, max-pooled to at most :data:`OVERVIEW` pixels: a job,
    ``MISSING`` while it runs."""

    def work(progress: Progress) -> str:
        return job_work.overview_of(_run(key), head, weighting(key) if weighted else None)

    return job_view.run_job(
        OverviewKey(key, head, weighted),
        f"Drawing head {head}'s whole pattern",
        work,
        cost=overview_picture_cost(_run(key), head, weighted),
    )


def overview_picture_cost(run: AttentionRun, head: Head, weighted: bool) -> Cost:
    """:func:`models.capture.views.overview_cost` and the picture drawn from it (with half
    again, as for the rest)."""
    found = overview_cost(run, head.layer, OVERVIEW, weighted)
    pixels = min(OVERVIEW, run.n_tokens) ** 2
    return replace(found, peak_bytes=found.peak_bytes + 3 * PIXEL_BYTES * pixels // 2)


def sink_key(key: RunKey, head: Head) -> int | None:
    """The key position ``head`` sinks most weight into (see ``strongest_sink``): a job, None
    while it runs (its line says so; the page is drawn again when it ends)."""
    found = job_view.run_job(
        SinkKey(key, head),
        f"Finding head {head}'s strongest sink",
        lambda progress: strongest_sink(_run(key), head.layer, head.index),
        cost=strongest_sink_cost(_run(key)),
        background=f"Finding head {head}'s strongest sink…",
    )
    return None if found is job_view.MISSING else found


def words_of(key: RunKey) -> Words:
    """Which tokens of the run form each word (see ``models.capture.words.WORD_RULE``)."""

    def build() -> Words:
        return job_work.words_for(server.current().models.get(key.spec), _run(key))

    return server.current().derived.get_or_compute(WordsKey(key), build)


def grid_pictures(key: RunKey, weighted: bool, n_heads: int) -> list[list[str]]:
    """The grid's pictures as ``layer x head`` data URIs (what an exported view holds)."""
    cells = [cell.get("src", "") for cell in thumbnails(key, weighted)]
    return [cells[i : i + n_heads] for i in range(0, len(cells), n_heads)]


def difference(key: RunKey, run: AttentionRun) -> PatternDifference | Any | None:
    """The run's largest pattern difference from float32 on its first rows (a job: one
    float32 pass over those rows); None where it cannot be measured cheaply, ``MISSING``
    while it runs."""

    def work(progress: Progress) -> PatternDifference | None:
        model = server.current().models.get(key.spec)
        return pattern_difference(model, _run(key), progress=progress)

    rows = max(1, difference_rows(run))
    return job_view.run_job(
        PrecisionKey(key),
        f"Comparing the first {rows:,} rows with float32",
        work,
        background=f"Measuring how far {run.dtype} lies from float32 on the first {rows:,} rows…",
        cost=difference_cost(run),
    )


def difference_text(found: PatternDifference | None, dtype: str) -> str:
    """The caption of a low-precision run's measured difference from float32."""
    if found is None:
        return (
            f"Run in {dtype}. Its difference from float32 is not measured on a bidirectional "
            "model's long prompt."
        )
    layer, head, query, key = found.where
    return (
        f"Run in {dtype}: largest pattern difference from {found.reference}: "
        f"{found.largest:.2g} (head {Head(layer, head)}, query {query}, key {key}; first "
        f"{found.n_rows:,} rows)."
    )


LAYER_MARKS = (
    "Under each layer's number, what it computes: G a softmax over every earlier key, W and a "
    "number a sliding window of that many keys (the heatmap blanks keys past its edge), lin "
    "linear attention. Hover a number for more."
)


def layer_rows(run: AttentionRun) -> list[dict[str, str]] | None:
    """Each layer's mark and description for the grid's rows, or None when the layers are all
    plain softmax (nothing to tell apart)."""
    if run.extras is None:
        return None
    return [
        {"mark": layer.mark(), "title": f"layer {i}: {layer.describe()}"}
        for i, layer in enumerate(run.extras.layers)
    ]
