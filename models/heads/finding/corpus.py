"""Corpora: the texts head scores are averaged over.

A corpus is a list of passages. Two ship with the app:

- ``stdlib``: for the bundled GPT-2, passages of its own held-out split, rebuilt from the
  installed Python standard library exactly as ``models/bundled/corpus.py`` reads it (the ``.py``
  sources in sorted path order, tests left out, the first ``max_chars`` characters, the last 2 %
  of the tokens held out). The text of the held-out tokens is recovered by tokenizing only the
  tail of the corpus from a line start: byte-level BPE never merges across a newline followed by
  a non-space character, so those tokens are exactly the end of the full tokenization;
- ``english``: 24 passages of plain English prose written for this repository
  (``corpora/english.txt``), for SmolLM2 and every other model.

The command line's default text, :func:`sample` (``corpora/sample.txt``), is a one-text corpus.

Uploads are ``.txt`` (passages separated by blank lines) or ``.jsonl`` (one ``{"text": ...}``
object per line), at most :data:`MAX_UPLOAD_BYTES`. Whatever a visitor uploads ends in a
:class:`CorpusError` with a message or in a corpus, never in another exception: JSON nested too
deeply, an integer too long to convert and a lone surrogate escape are each refused by line.
Every passage is kept under :data:`MAX_PASSAGE_CHARS` characters (longer ones are split at
whitespace) so that a link into the explorer can carry it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.cost import Cost
from models.errors import UserError

CORPORA_DIR = Path(__file__).resolve().parent / "corpora"
MAX_PASSAGE_CHARS = 2000
MAX_UPLOAD_BYTES = 5_000_000
MAX_PASSAGES = 2000
MIN_PASSAGE_TOKENS = 16
STDLIB_PASSAGES = 48
# sha256 of the bundled model's 12,000,000-character training corpus on the Python that trained
# it (3.11.7); its tokenization has the 3,894,685 tokens the training log records.
STDLIB_SHA256 = "0f03610f83f82031e835f0115fa56bb6b70dd82aad431a4dc81d2902eebc854e"
CORPUS_READ_S = 2.0  # the bundled model reads its held-out split of the standard library
# Python holds the standard library's text at two bytes a character (it has characters beyond
# Latin-1, none beyond the BMP)
STR_BYTES = 2
# the fast tokenizer's working memory per character it encodes: its Rust encoding's ids, offsets,
# alignments and token strings, then the Python lists of ids and mask (measured: 99 MiB for the
# held-out tail's 468,303 characters, 220 bytes a character)
TOKENIZE_BYTES = 300


class CorpusError(UserError):
    """An uploaded corpus cannot be read; the message says what is wrong and where."""


@dataclass(frozen=True)
class Corpus:
    """Passages to score heads on.

    Attributes:
        name: short name (``stdlib held-out``, ``english``, the uploaded file's name).
        texts: the passages, each under :data:`MAX_PASSAGE_CHARS` characters.
        source: one sentence saying where the passages come from.
    """

    name: str
    texts: tuple[str, ...]
    source: str

    @property
    def key(self) -> str:
        """A content hash: equal corpora share cached results."""
        digest = hashlib.sha256("\x00".join(self.texts).encode("utf-8")).hexdigest()
        return f"{self.name}:{digest[:16]}"

    def head(self, n: int) -> Corpus:
        """The first ``n`` passages."""
        return Corpus(self.name, self.texts[: max(1, n)], self.source)


def split_long(text: str, limit: int = MAX_PASSAGE_CHARS) -> list[str]:
    """``text`` cut at whitespace into pieces of at most ``limit`` characters (a word longer
    than ``limit`` is cut inside)."""
    text = text.strip()
    pieces = []
    while len(text) > limit:
        cut = max(text.rfind(" ", 0, limit + 1), text.rfind("\n", 0, limit + 1))
        cut = cut if cut > 0 else limit
        pieces.append(text[:cut].strip())
        text = text[cut:].strip()
    if text:
        pieces.append(text)
    return [p for p in pieces if p]


def _checked(name: str, texts: Sequence[str], source: str) -> Corpus:
    passages = [piece for text in texts for piece in split_long(text)]
    if not passages:
        raise CorpusError(f"{name} holds no text: every passage is empty.")
    if len(passages) > MAX_PASSAGES:
        raise CorpusError(
            f"{name} holds {len(passages):,} passages (after cutting long ones to "
            f"{MAX_PASSAGE_CHARS:,} characters); the limit is {MAX_PASSAGES:,}."
        )
    return Corpus(name, tuple(passages), source)


def parse_txt(text: str) -> list[str]:
    """Passages of a text file: blocks separated by one or more blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return [block.strip() for block in re.split(r"\n[ \t]*\n", text) if block.strip()]


def json_line(line: str, where: str) -> Any:
    """One JSON value, or a :class:`CorpusError` saying why not (``where``: file and line).

    Besides malformed JSON, ``json.loads`` raises ``RecursionError`` for deep nesting and
    ``ValueError`` for an integer of more than ``sys.get_int_max_str_digits()`` digits; both
    are refused here, before any of it reaches the page.
    """
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        raise CorpusError(f"{where}: not valid JSON ({err.msg}).") from err
    except RecursionError as err:
        raise CorpusError(f"{where}: the JSON is nested too deeply to read.") from err
    except ValueError as err:  # an integer longer than Python converts
        raise CorpusError(f"{where}: holds a number too long to read.") from err


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (``\\ud800``): JSON can spell one, but it
    is not a character and cannot be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_jsonl(text: str, name: str = "the file") -> list[str]:
    """Passages of a JSON Lines file: one ``{"text": "..."}`` object per non-blank line."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name}, line {number}"
        record = json_line(line, where)
        if not isinstance(record, dict) or "text" not in record:
            raise CorpusError(
                f'{where}: expected an object with a "text" field, like {{"text": "..."}}.'
            )
        if not isinstance(record["text"], str):
            raise CorpusError(
                f'{where}: "text" must be a string, not {type(record["text"]).__name__}.'
            )
        if has_lone_surrogate(record["text"]):
            raise CorpusError(
                f'{where}: "text" holds a lone surrogate escape (such as '
                "\\ud800), which is not a character."
            )
        out.append(record["text"])
    return out


def parse_upload(name: str, data: bytes) -> Corpus:
    """A corpus from an uploaded ``.txt`` or ``.jsonl`` file.

    Raises:
        CorpusError: wrong extension, too large, not UTF-8, bad JSON, no text, too many passages.
    """
    suffix = Path(name).suffix.lower()
    if suffix not in (".txt", ".jsonl"):
        raise CorpusError(
            f"{name}: upload a .txt file (passages separated by blank lines) or a "
            '.jsonl file (one {"text": ...} per line).'
        )
    if len(data) > MAX_UPLOAD_BYTES:
        raise CorpusError(
            f"{name} is {len(data) / 1e6:.1f} MB; the limit is {MAX_UPLOAD_BYTES / 1e6:.0f} MB."
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CorpusError(f"{name} is not UTF-8 text (byte {err.start} cannot be read).") from err
    if "\x00" in text:
        raise CorpusError(f"{name} holds NUL bytes: it looks like a binary file, not text.")
    texts = parse_txt(text) if suffix == ".txt" else parse_jsonl(text, name)
    return _checked(name, texts, f"uploaded file {name}")


def read_corpus_file(path: Path) -> Corpus:
    """A corpus from a ``.txt`` or ``.jsonl`` file on disk (the command line's ``--corpus``)."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise CorpusError(f"Cannot read {path}: {err.strerror or err}.") from err
    return parse_upload(Path(path).name, data)


def sample() -> Corpus:
    """The command line's default text as a one-text corpus: half Python, half plain English,
    because the bundled model learned from Python source and a hub model mostly from prose."""
    text = (CORPORA_DIR / "sample.txt").read_text(encoding="utf-8")
    return Corpus(
        "bundled sample",
        (text,),
        "the bundled sample text (models/heads/finding/corpora/sample.txt): one text, so no spread",
    )


def english() -> Corpus:
    """The bundled English passages (plain prose written for this repository)."""
    text = (CORPORA_DIR / "english.txt").read_text(encoding="utf-8")
    return _checked(
        "english",
        parse_txt(text),
        "24 passages of plain English prose written for "
        "this repository (models/heads/finding/corpora/english.txt)",
    )


# --- the bundled model's held-out split -------------------------------------------------------


def training_facts(model_dir: Path) -> tuple[int, int]:
    """``(max_chars, corpus_tokens)`` of the bundled model's training corpus, from its log."""
    log = json.loads((Path(model_dir) / "training_log.json").read_text(encoding="utf-8"))
    final = log["stages"][-1]
    return int(final["args"]["max_chars"]), int(final["corpus_tokens"])


def tail_start(text: str, n_chars: int) -> int:
    """A position at or before ``len(text) - n_chars`` where a line starts with a non-space
    character; no byte-level BPE token spans it."""
    pos = max(0, len(text) - n_chars)
    while pos > 0:
        newline = text.rfind("\n", 0, pos)
        if newline < 0:
            return 0
        if newline + 1 < len(text) and not text[newline + 1].isspace():
            return newline + 1
        pos = newline
    return 0


def held_out_text(tokenizer: Any, text: str, corpus_tokens: int) -> str:
    """The text of the last ``corpus_tokens // 50`` tokens of ``text`` (train.py's split).

    Args:
        tokenizer: the bundled model's tokenizer.
        text: the training corpus as ``read_corpus`` returns it.
        corpus_tokens: the length of its full tokenization (from the training log).
    """
    n_val = corpus_tokens // 50
    chars = 6 * n_val
    while True:
        start = tail_start(text, chars)
        ids = tokenizer(text[start:], add_special_tokens=False)["input_ids"]
        if len(ids) >= n_val or start == 0:
            decoded: str = tokenizer.decode(ids[-n_val:])
            return decoded
        chars *= 2


def line_chunks(
    text: str, tokenizer: Any, max_tokens: int, max_chars: int = MAX_PASSAGE_CHARS
) -> list[str]:
    """Consecutive whole lines of ``text`` grouped into passages of at most ``max_tokens``
    tokens and ``max_chars`` characters; the first (possibly partial) line and passages under
    :data:`MIN_PASSAGE_TOKENS` tokens are dropped."""
    lines = text.split("\n")[1:]
    counts = [
        len(ids)
        for ids in tokenizer([line + "\n" for line in lines], add_special_tokens=False)["input_ids"]
    ]
    chunks: list[str] = []
    current: list[str] = []
    tokens, chars = 0, 0
    for line, count in zip(lines, counts, strict=True):
        if current and (tokens + count > max_tokens or chars + len(line) + 1 > max_chars):
            chunks.append("\n".join(current))
            current, tokens, chars = [], 0, 0
        if count <= max_tokens and len(line) < max_chars:
            current.append(line)
            tokens, chars = tokens + count, chars + len(line) + 1
    if current:
        chunks.append("\n".join(current))
    return [
        c
        for c in chunks
        if c.strip()
        and len(tokenizer(c, add_special_tokens=False)["input_ids"]) >= MIN_PASSAGE_TOKENS
    ]


def spread_pick(items: Sequence[str], n: int) -> list[str]:
    """``n`` items evenly spaced over ``items`` (all of them when there are fewer)."""
    if len(items) <= n:
        return list(items)
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, n).round()]


def stdlib_held_out(
    model_dir: Path, tokenizer: Any, max_tokens: int, n_passages: int = STDLIB_PASSAGES
) -> Corpus:
    """Passages of the bundled model's held-out split, evenly spaced through it.

    Args:
        model_dir: the bundled model's directory (holds ``training_log.json``).
        tokenizer: its tokenizer.
        max_tokens: most tokens per passage (without the BOS the app adds).
        n_passages: how many passages to keep.
    """
    from models.bundled.corpus import read_corpus

    max_chars, corpus_tokens = training_facts(model_dir)
    text = read_corpus(max_chars)
    same = hashlib.sha256(text.encode("utf-8")).hexdigest() == STDLIB_SHA256
    chunks = line_chunks(held_out_text(tokenizer, text, corpus_tokens), tokenizer, max_tokens)
    source = (
        f"{n_passages} passages of the bundled model's held-out split: the last 2 % of "
        "its Python standard-library training corpus, rebuilt from this Python's sources"
    )
    if not same:
        source += (
            " (this Python's standard library differs from the one the model was "
            "trained on, so some passages may be text it saw in training)"
        )
    return Corpus("stdlib held-out", tuple(spread_pick(chunks, n_passages)), source)


def corpus_cost(model: Any) -> Cost:
    """The cost of :func:`default_corpus`, before it runs.

    Memory, the bundled model: the training corpus's text, held while the tail holding its
    held-out split (``6`` characters a held-out token, as :func:`held_out_text` first tries) is
    tokenized, at :data:`TOKENIZE_BYTES` a character; the text while it is read (its parts,
    their join and its slice, and UTF-8 bytes for the hash: under six bytes a character) stays
    below that. Every other model: the English passages' file, tokenized.
    """
    from models.model.spec import BUNDLED_DIR

    if model.spec.kind == "bundled":
        max_chars, corpus_tokens = training_facts(BUNDLED_DIR)
        tail = 6 * (corpus_tokens // 50)
        peak = STR_BYTES * max_chars + TOKENIZE_BYTES * tail
    else:
        peak = TOKENIZE_BYTES * (CORPORA_DIR / "english.txt").stat().st_size
    return Cost(peak_bytes=peak, overhead_s=CORPUS_READ_S)


def default_corpus(model: Any) -> Corpus:
    """The bundled corpus for a loaded model: its held-out split for the bundled GPT-2, the
    English passages for every other model."""
    from models.model.spec import BUNDLED_DIR

    if model.spec.kind == "bundled":
        per_passage = max(MIN_PASSAGE_TOKENS, min(120, model.facts.n_ctx - 8))
        return stdlib_held_out(BUNDLED_DIR, model.tokenizer, per_passage)
    return english()


def model_corpus(model: Any) -> Corpus:
    """:func:`default_corpus` of ``model``, built once per model and kept in its memo."""
    found: Corpus | None = model.memo.get("bundled_corpus")
    if found is None:
        found = model.memo["bundled_corpus"] = default_corpus(model)
    return found


def bundled_corpus_with_key(model: Any, key: str) -> Corpus | None:
    """The model's bundled corpus, or its first passages, whose :attr:`Corpus.key` is ``key``;
    None for any other corpus (an upload, the sidebar's prompt). Built once per model."""
    found = model_corpus(model)
    if not key.startswith(f"{found.name}:"):
        return None
    digest = hashlib.sha256()  # the key of every prefix in one pass over the texts
    for n, text in enumerate(found.texts, start=1):
        digest.update(("\x00" if n > 1 else "").encode("utf-8") + text.encode("utf-8"))
        if key == f"{found.name}:{digest.copy().hexdigest()[:16]}":
            return found.head(n)
    return None
