"""The model writes, one token at a time with its KV cache, and every head's attention row of
every step is kept.

Step ``s`` is the forward call that chose output token ``s``: its query is the position before
that token (step 0: the last prompt token), and its rows cover keys ``0 .. n_prompt - 1 + s``.
The first call reads the whole prompt (prefill); each later call reads the one token chosen
before it, the cache holding the rest. Calls go through :mod:`models.generate.view` (the model's
own modules with SDPA, as transformers' ``generate`` runs them), so greedy decoding writes what
``generate(do_sample=False)`` writes, token for token.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import torch

from models.capture.store import read_only
from models.errors import UserError
from models.generate.kv import cache_length, cache_nbytes, reserved_cache
from models.generate.rows import RowRecorder, RowStore, RowsUnavailable, row_series
from models.generate.sampling import Choice, choose
from models.generate.settings import (
    GenerationError,
    GenerationSettings,
    Prompt,
    check,
    prepare_prompt,
)
from models.generate.view import handling, model_view, view_device
from models.model.facts import ModelFacts
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from models.model.tokens import readable_tokens
from models.model.weights import original
from models.progress import Progress, quiet

StopReason = Literal["eos", "length"]


@dataclass(frozen=True)
class Step:
    """One generated token.

    Attributes:
        index: the step (0 = first new token).
        choice: the token, its probability, the entropy and the top alternatives.
        label: the token as a readable label; ``top_labels`` the alternatives'.
        text: the token decoded on its own (a piece of a multi-byte character shows as U+FFFD;
            decode ``Generation.output_ids`` for the whole text).
        sink: ``layer head_index`` attention of this step's query on position 0.
        prompt_share: ``layer head_index`` attention on the prompt (the rest is on the output
            and, where the model has them, its learned sinks).
        rows: ``layer head_index key_pos`` float32 rows, given to ``on_step`` only (a page keeps
            what it shows; the result rebuilds any step from :class:`RowStore`).
        learned_sink: ``layer head_index`` weight on the heads' learned sinks (what a row over
            the keys lacks of 1), for a model with them; else None.
    """

    index: int
    choice: Choice
    label: str
    text: str
    top_labels: tuple[str, ...]
    sink: np.ndarray
    prompt_share: np.ndarray
    rows: np.ndarray | None = None
    learned_sink: np.ndarray | None = None


@dataclass(frozen=True)
class Generation:
    """A finished (or stopped) generation; NumPy and plain values only, no model, no cache.

    Attributes:
        prompt: the text typed; ``templated`` the chat-template text fed (None without chat).
        settings: as run, with the seed that was used (so a link reproduces the text).
        ids: prompt + output token ids; ``n_prompt`` of them are the prompt.
        tokens: a readable label per id.
        steps: one :class:`Step` per output token (rows dropped).
        sink, prompt_share: ``step layer head_index`` series (see :class:`Step`).
        store: every step's rows, rebuilt on demand.
        stop: ``"eos"`` (the model ended its text) or ``"length"`` (max_new_tokens reached).
        cache_tokens, cache_bytes: the real KV cache after the last step (it holds every token
            but the last one written, which was never fed back).
        output_text: what the model wrote, decoded (special tokens left out).
        explorer_text: text whose tokenization gives ``ids`` (the tokenizer's own leading BOS
            left out), to open the whole text in the explorer; ``explorer_exact`` whether it
            really tokenizes back to ``ids`` (a decoded text can tokenize differently).
    """

    prompt: str
    templated: str | None
    settings: GenerationSettings
    facts: ModelFacts
    ids: tuple[int, ...]
    n_prompt: int
    tokens: tuple[str, ...]
    steps: tuple[Step, ...]
    sink: np.ndarray
    prompt_share: np.ndarray
    store: RowStore
    stop: StopReason
    cache_tokens: int
    cache_bytes: int
    explorer_text: str
    explorer_exact: bool
    output_text: str = ""
    learned_sink: np.ndarray | None = None

    @property
    def output_share(self) -> np.ndarray:
        """``step layer head_index`` attention on the model's own output: what is on neither
        the prompt nor a learned sink."""
        rest = 1.0 - self.prompt_share
        return rest if self.learned_sink is None else rest - self.learned_sink

    @property
    def output_ids(self) -> tuple[int, ...]:
        return self.ids[self.n_prompt :]

    @property
    def nbytes(self) -> int:
        steps = sum(s.sink.nbytes + s.prompt_share.nbytes for s in self.steps)
        return int(self.store.nbytes + self.sink.nbytes + self.prompt_share.nbytes + steps)

    def rows(self, step: int) -> np.ndarray:
        """``layer head_index key_pos`` rows of step ``step`` over its ``n_prompt + step`` keys."""
        return self.store.rows(step)


def eos_ids(model: ModelHandle) -> set[int]:
    """Tokens that end a text: the generation config's (as ``generate`` uses), else the
    tokenizer's."""
    config = getattr(original(model), "generation_config", None)
    found = getattr(config, "eos_token_id", None)
    if found is None:
        found = getattr(model.tokenizer, "eos_token_id", None)
    if found is None:
        return set()
    return {int(i) for i in (found if isinstance(found, (list, tuple)) else [found])}


def explorer_text(model: ModelHandle, ids: list[int]) -> tuple[str, bool]:
    """Text for the explorer whose tokenization is ``ids``, and whether it really is."""
    tok = model.tokenizer
    bos = getattr(tok, "bos_token_id", None)
    body = ids[1:] if model.facts.prepends_bos and ids and ids[0] == bos else ids
    text = tok.decode(body, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    try:
        again = [int(i) for i in tokenize(model, text)[0][0]]
    except UserError:  # an empty text (the prompt was only a BOS) does not round-trip
        return text, False
    return text, again == list(ids)


class _Collector:
    """What the loop keeps per step."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.q: list[torch.Tensor] = []

    def add(self, q: torch.Tensor, step: Step) -> None:
        self.steps.append(step)
        self.q.append(q.cpu())

    def store(self, recorder: RowRecorder, first_query: int) -> RowStore:
        keys = recorder.keys[:, :, : recorder.length].contiguous().cpu().numpy()
        return RowStore(
            q=read_only(torch.stack(self.q).numpy()),
            keys=read_only(keys),
            terms=tuple(recorder.terms),
            first_query=first_query,
            sinks=recorder.held_sinks,
        )


def _forward(
    view: Any, inputs: torch.Tensor, cache: object, recorder: RowRecorder
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """One cached forward call: the last position's float32 logits on the CPU, and the step's
    ``(q, rows)``."""
    with handling(recorder):
        out = view(
            input_ids=inputs.to(view_device(view)),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
    q, rows, _ = recorder.step_rows(int(inputs.shape[1]))
    return out.logits[0, -1].to("cpu", torch.float32), (q, rows)


def _step(
    model: ModelHandle,
    index: int,
    choice: Choice,
    rows: torch.Tensor,
    n_prompt: int,
    keep_rows: bool,
    learned: bool = False,
) -> Step:
    labels = readable_tokens(model.tokenizer, [choice.token_id, *choice.top_ids])
    sink, prompt_share = row_series(rows, n_prompt)
    return Step(
        index=index,
        choice=choice,
        label=labels[0],
        text=model.tokenizer.decode([choice.token_id], skip_special_tokens=False),
        top_labels=tuple(labels[1:]),
        sink=sink,
        prompt_share=prompt_share,
        rows=rows.to("cpu", torch.float32).numpy() if keep_rows else None,
        # what a row over the keys lacks of 1: read only for a model with learned sinks
        learned_sink=(1.0 - rows.sum(-1)).clamp_min(0.0).to("cpu", torch.float32).numpy()
        if learned
        else None,
    )


def generate(
    model: ModelHandle,
    prompt: str,
    settings: GenerationSettings,
    on_step: Callable[[Step], None] | None = None,
    progress: Progress = quiet,
) -> Generation:
    """Let the model write after ``prompt`` and keep every step's attention rows.

    Args:
        model: a loaded causal language model.
        prompt: the text to continue (or the user turn, with ``settings.chat``).
        settings: how many tokens and how to choose them.
        on_step: called with each :class:`Step` (live rows included) as soon as it is chosen,
            for streaming; it may raise :class:`models.progress.Cancelled`.
        progress: ``progress(fraction, text)`` per step; it may raise Cancelled.

    Returns:
        The :class:`Generation`.

    Raises:
        PromptError: empty prompt.
        GenerationError: encoder, bad settings, prompt + new tokens over the context, or a
            model whose attention rows cannot be read.
        Cancelled: raised by a callback; nothing is kept.
    """
    prepared: Prompt = prepare_prompt(model, prompt, settings.chat)
    check(model, settings, prepared.n_full)
    if settings.sampling and settings.seed is None:
        settings = settings.with_seed(secrets.randbits(31))
    generator = (
        torch.Generator().manual_seed(int(settings.seed or 0)) if settings.sampling else None
    )
    view, stops = model_view(model), eos_ids(model)
    n_prompt = int(prepared.ids.shape[1])
    ids, inputs = [int(i) for i in prepared.ids[0]], prepared.ids
    total = settings.max_new_tokens
    cache, kept = reserved_cache(view.config, n_prompt + total), _Collector()
    stop: StopReason = "length"
    facts = model.facts
    recorder = RowRecorder(
        facts.n_layers, facts.n_kv_heads, facts.d_head, n_prompt + total, view_device(view)
    )
    with torch.no_grad():
        for index in range(total):
            progress(index / total, f"token {index + 1} of at most {total}")
            try:
                logits, (q, rows) = _forward(view, inputs, cache, recorder)
            except RowsUnavailable as err:
                raise GenerationError(
                    f"Attention rows of {facts.name} cannot be read: its attention uses {err}."
                ) from err
            choice = choose(logits, settings, generator)
            step = _step(
                model,
                index,
                choice,
                rows,
                n_prompt,
                keep_rows=on_step is not None,
                learned=bool(recorder.held_sinks),
            )
            kept.add(q, replace(step, rows=None))
            ids.append(choice.token_id)
            if on_step is not None:
                on_step(step)
            if choice.token_id in stops:
                stop = "eos"
                break
            inputs = torch.tensor([[choice.token_id]])
    progress(1.0, "done")
    text, exact = explorer_text(model, ids)
    return Generation(
        prompt=prompt,
        templated=prepared.templated,
        settings=settings,
        facts=model.facts,
        ids=tuple(ids),
        n_prompt=n_prompt,
        tokens=tuple(readable_tokens(model.tokenizer, ids)),
        steps=tuple(kept.steps),
        sink=np.stack([s.sink for s in kept.steps]),
        learned_sink=None
        if kept.steps[0].learned_sink is None
        else np.stack([s.learned_sink for s in kept.steps if s.learned_sink is not None]),
        prompt_share=np.stack([s.prompt_share for s in kept.steps]),
        store=kept.store(recorder, n_prompt - 1),
        stop=stop,
        cache_tokens=cache_length(cache),
        cache_bytes=cache_nbytes(cache),
        explorer_text=text,
        explorer_exact=exact,
        output_text=model.tokenizer.decode(ids[n_prompt:], skip_special_tokens=True),
    )
