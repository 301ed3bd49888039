"""Ready-made tasks whose right answer is known.

- Copying (induction): the clean prompt is ``L`` random words followed by the first ``L - 1`` of
  them again, so the next word is the ``L``-th by copying. The corrupted prompt replaces the first
  ``L`` words by other random words: nothing earlier tells the model what comes next. The answer
  is the clean ``L``-th word, the wrong token the corrupted one at that place.
- Names (IOI, Wang et al. 2022): "When Mary and John went to the store, John gave a drink to"
  ends in " Mary" (the name not repeated); the corrupted prompt repeats the other name, so the
  answer flips to " John". Both names are one token for GPT-2-style and SmolLM2 tokenizers.

Words are drawn from tokens that are a space and letters and that tokenise back to themselves,
so the prompts are plain text a person can read and edit, and the page re-tokenises them to
exactly the drawn ids.
"""

from __future__ import annotations

from contextlib import suppress

import numpy as np

from models.circuits.task import CircuitTask, TaskError, prepare
from models.model.forward import piece_ids, tokenize
from models.model.handle import ModelHandle
from models.model.weights import vocab_size

COPY_WORDS = 12
COPY_SEED = 0
MAX_TRIES = 20

IOI = CircuitTask(
    clean="When Mary and John went to the store, John gave a drink to",
    corrupted="When Mary and John went to the store, Mary gave a drink to",
    answer=" Mary",
    wrong=" John",
)


def word_tokens(model: ModelHandle) -> list[int]:
    """Ids of tokens that decode to a space and two or more ASCII letters and re-encode alone."""
    tokenizer = model.tokenizer
    n = min(len(tokenizer), vocab_size(model))
    found = []
    for i in range(n):
        text = tokenizer.decode([i])
        word = text[1:]
        if (
            text.startswith(" ")
            and len(word) >= 2
            and word.isascii()
            and word.isalpha()
            and piece_ids(model, text) == [i]
        ):
            found.append(i)
    return found


def copying_task(
    model: ModelHandle, n_words: int = COPY_WORDS, seed: int = COPY_SEED
) -> CircuitTask:
    """The copying task for ``model`` (random words drawn with ``seed``).

    Raises:
        TaskError: too few word tokens, a context too short, or no draw that tokenises back.
    """
    words = model.memo.get("circuits_word_tokens")
    if words is None:
        words = model.memo["circuits_word_tokens"] = word_tokens(model)
    if len(words) < 2 * n_words:
        raise TaskError(
            f"{model.facts.name}'s vocabulary has only {len(words)} whole-word "
            f"tokens; the copying task needs {2 * n_words}."
        )
    if 2 * n_words + 2 > model.facts.n_ctx:
        raise TaskError(
            f"{model.facts.name} reads at most {model.facts.n_ctx} tokens: too "
            f"few for {n_words} words twice."
        )
    rng = np.random.default_rng(seed)
    decode = model.tokenizer.decode
    for _ in range(MAX_TRIES):
        drawn = [words[i] for i in rng.choice(len(words), 2 * n_words, replace=False)]
        first, other = drawn[:n_words], drawn[n_words:]
        clean_ids = first + first[:-1]
        corrupted_ids = other + first[:-1]
        task = CircuitTask(
            clean=decode(clean_ids),
            corrupted=decode(corrupted_ids),
            answer=decode([first[-1]]),
            wrong=decode([other[-1]]),
        )
        if _ends_with(model, task.clean, clean_ids) and _ends_with(
            model, task.corrupted, corrupted_ids
        ):
            return task
    raise TaskError(f"No draw of random words tokenises back to itself on {model.facts.name}.")


def _ends_with(model: ModelHandle, text: str, ids: list[int]) -> bool:
    """Whether ``text`` tokenises to ``ids`` after the model's own leading special tokens."""
    got = tokenize(model, text)[0][0].tolist()
    return got[len(got) - len(ids) :] == ids and len(got) - len(ids) <= 1


def presets(model: ModelHandle) -> dict[str, CircuitTask]:
    """The ready-made tasks that fit ``model``'s tokenizer, by label; names first when they fit.

    A task is left out where it cannot be built: the names task where its prompts differ in
    token length or a name is not one token (the bundled model's tokenizer, trained on Python
    source, spells names in pieces), the copying task where too few words are single tokens.
    """
    tasks = {}
    with suppress(TaskError):
        prepare(model, IOI)
        tasks["Names (IOI)"] = IOI
    with suppress(TaskError):
        tasks["Copying random words (induction)"] = copying_task(model)
    return tasks
