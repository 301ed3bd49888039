"""The Head finder page's state as one frozen value: the corpus, the repeated-token settings, the
flag thresholds, the top examples looked at, and how heads are ranked and pruned. Its link is
read and written in :mod:`ui.links`. No Streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal, get_args

from models.head import Head
from models.heads.finding.induction import MAX_BATCH
from models.heads.names import EXAMPLE_SCORES, AblationMethod, ExampleScore, Ranking
from models.heads.table import Thresholds
from models.model.spec import DType

CorpusSource = Literal["bundled", "prompt", "upload"]
CORPUS_SOURCES: tuple[CorpusSource, ...] = get_args(CorpusSource)
PruneMode = Literal["least", "hand", "groups"]
PRUNE_MODES: tuple[PruneMode, ...] = get_args(PruneMode)
ABLATIONS: tuple[AblationMethod, ...] = get_args(AblationMethod)
MAX_SEED = 2**31 - 1
MAX_SPAN = 500
BIG_MODEL_HEADS = 48  # above this many heads, rank by gradient and measure only when asked


@dataclass(frozen=True)
class HeadsView:
    """What the Head finder measures and shows.

    Attributes:
        corpus: where the texts come from; ``texts`` how many of them, each cut to
            ``max_tokens`` tokens.
        span, batch, seed: the repeated random tokens the induction score is measured on.
        thresholds: a head is flagged when a score's lower bound clears its threshold.
        example_score, example_head: the top examples shown (None: the strongest head).
        ranking, budget, ablate: how heads are ranked for pruning, over how many corpus tokens,
            and whether to measure it; None: chosen for the model's size.
        method: zero- or mean-ablation for the pruning curve.
        prune_mode, prune_k, prune_groups, prune_pick: which heads a pruned checkpoint drops
            (``prune_k`` None: a tenth of the heads).
        prune_dtype: the checkpoint's dtype.
    """

    IN_SESSION: ClassVar[frozenset[str]] = frozenset()

    corpus: CorpusSource = "bundled"
    texts: int = 48
    max_tokens: int = 256
    span: int = 50
    batch: int = 8
    seed: int = 0
    thresholds: Thresholds = field(default_factory=Thresholds)
    example_score: ExampleScore = EXAMPLE_SCORES[0]
    example_head: Head | None = None
    ranking: Ranking | None = None
    method: AblationMethod = "zero"
    budget: int | None = None
    ablate: bool | None = None
    prune_mode: PruneMode = "least"
    prune_k: int | None = None
    prune_groups: int = 1
    prune_pick: tuple[Head, ...] = ()
    prune_dtype: DType = "float32"


def _within(value: int, low: int, high: int) -> int:
    return min(max(int(value), low), max(low, high))


def with_corpus(view: HeadsView, source: CorpusSource, texts: int, max_tokens: int) -> HeadsView:
    return replace(view, corpus=source, texts=int(texts), max_tokens=int(max_tokens))


def fit_corpus(view: HeadsView, n_texts: int, n_ctx: int) -> HeadsView:
    """``view`` with as many texts as the corpus has and a token cap the model can read."""
    return replace(
        view,
        texts=_within(view.texts, 1, n_texts),
        max_tokens=_within(view.max_tokens, 8, n_ctx),
    )


def longest_span(n_ctx: int) -> int:
    """The longest repeated span a model of context ``n_ctx`` reads twice after a start token."""
    return max(2, min(MAX_SPAN, (n_ctx - 2) // 2))


def with_repeats(view: HeadsView, span: int, batch: int, seed: int) -> HeadsView:
    return replace(view, span=int(span), batch=int(batch), seed=int(seed) % (MAX_SEED + 1))


def fit_repeats(view: HeadsView, n_ctx: int) -> HeadsView:
    """A span the model's context holds twice, and at least two sequences (a spread)."""
    return replace(
        view,
        span=_within(view.span, 2, longest_span(n_ctx)),
        batch=_within(view.batch, 2, MAX_BATCH),
    )


def with_thresholds(view: HeadsView, thresholds: Thresholds) -> HeadsView:
    return replace(view, thresholds=thresholds)


def choose_example(view: HeadsView, score: ExampleScore, head: Head | None) -> HeadsView:
    """Look at ``score``'s examples on ``head``; a new score starts on its strongest head."""
    return replace(
        view, example_score=score, example_head=head if score == view.example_score else None
    )


def with_importance(
    view: HeadsView, ranking: Ranking, method: AblationMethod, budget: int, ablate: bool
) -> HeadsView:
    return replace(view, ranking=ranking, method=method, budget=int(budget), ablate=bool(ablate))


def shown_ranking(view: HeadsView, n_heads: int) -> Ranking:
    """The ranking: the chosen one, else measured for a small model and estimated for a big."""
    if view.ranking is not None:
        return view.ranking
    return "first_order" if n_heads > BIG_MODEL_HEADS else "zero"


def shown_ablate(view: HeadsView, n_heads: int) -> bool:
    """Whether importance is measured: as chosen, else at once only for a small model."""
    return view.ablate if view.ablate is not None else n_heads <= BIG_MODEL_HEADS


def with_pruning(
    view: HeadsView,
    mode: PruneMode,
    k: int | None,
    groups: int,
    pick: tuple[Head, ...],
    dtype: DType,
) -> HeadsView:
    return replace(
        view,
        prune_mode=mode,
        prune_k=k,
        prune_groups=int(groups),
        prune_pick=tuple(sorted(pick)),
        prune_dtype=dtype,
    )


def shown_k(view: HeadsView, n_heads: int) -> int:
    """How many of the least important heads go: as chosen, else a tenth (at least one)."""
    k = view.prune_k if view.prune_k is not None else max(1, n_heads // 10)
    return _within(k, 1, n_heads - 1)


def fit_pruning(view: HeadsView, n_layers: int, n_heads: int, n_kv_heads: int) -> HeadsView:
    """Groups the model has and hand-picked heads it has."""
    picked = tuple(h for h in view.prune_pick if h.fits(n_layers, n_heads))
    return replace(
        view, prune_groups=_within(view.prune_groups, 1, n_kv_heads - 1), prune_pick=picked
    )
