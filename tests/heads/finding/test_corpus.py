"""Corpora: upload parsing and its errors, the bundled English passages, the stdlib split."""

import json

import pytest

from models.heads.finding.corpus import (
    MAX_PASSAGE_CHARS,
    MAX_UPLOAD_BYTES,
    Corpus,
    CorpusError,
    english,
    held_out_text,
    parse_upload,
    sample,
    split_long,
    tail_start,
)


def test_txt_passages_are_split_on_blank_lines():
    data = b"First passage,\nstill first.\n\n\n  \nSecond passage.\r\n\r\nThird.\n"
    corpus = parse_upload("notes.txt", data)
    assert corpus.texts == ("First passage,\nstill first.", "Second passage.", "Third.")
    assert corpus.name == "notes.txt" and "notes.txt" in corpus.source


def test_jsonl_reads_the_text_field_and_skips_blank_lines():
    lines = [json.dumps({"text": "One.", "id": 1}), "", json.dumps({"text": "Two ü."})]
    corpus = parse_upload("data.JSONL", "\n".join(lines).encode())
    assert corpus.texts == ("One.", "Two ü.")


def test_utf8_bom_is_accepted():
    assert parse_upload("a.txt", "\ufeffHello".encode("utf-8")).texts == ("Hello",)


@pytest.mark.parametrize(
    "name, data, says",
    [
        ("corpus.csv", b"a,b", "upload a .txt file"),
        ("empty.txt", b"  \n\n \n", "holds no text"),
        ("latin.txt", "caf\xe9".encode("latin-1"), "not UTF-8"),
        ("binary.txt", b"abc\x00def", "NUL bytes"),
        ("bad.jsonl", b'{"text": "ok"}\n{"text": "unclosed', "line 2: not valid JSON"),
        ("list.jsonl", b'["text"]', 'line 1: expected an object with a "text" field'),
        ("key.jsonl", b'{"body": "x"}', 'line 1: expected an object with a "text" field'),
        ("num.jsonl", b'{"text": 3}', '"text" must be a string, not int'),
        ("blank.jsonl", b'{"text": "  "}', "holds no text"),
    ],
)
def test_bad_uploads_say_what_is_wrong(name, data, says):
    with pytest.raises(CorpusError, match=says) as err:
        parse_upload(name, data)
    assert err.value.level == "error"


@pytest.mark.parametrize(
    "name, data, says",
    [
        (
            "deep.jsonl",
            b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "line 1: the JSON is nested too deeply",
        ),
        (
            "open.jsonl",
            b'{"text": "ok"}\n' + b"[" * (MAX_UPLOAD_BYTES - 20),
            "line 2: the JSON is nested",
        ),
        (
            "digits.jsonl",
            b'{"text": "ok", "n": ' + b"7" * 5000 + b"}",
            "line 1: holds a number too long to read",
        ),
        ("surrogate.jsonl", b'{"text": "a\\ud800b"}', "line 1: .*lone surrogate"),
        ("low.jsonl", b'{"text": "ok"}\n{"text": "\\udfff"}', "line 2: .*lone surrogate"),
    ],
)
def test_hostile_jsonl_gets_a_message_not_an_error_page(name, data, says):
    assert len(data) <= MAX_UPLOAD_BYTES
    with pytest.raises(CorpusError, match=says):
        parse_upload(name, data)


def test_a_surrogate_pair_escape_is_one_character():
    assert parse_upload("emoji.jsonl", b'{"text": "a\\ud83d\\ude00b"}').texts == ("a\U0001f600b",)


def test_the_sample_is_one_text_of_python_and_english():
    corpus = sample()
    assert len(corpus.texts) == 1 and "def moving_average" in corpus.texts[0]
    assert "ferry" in corpus.texts[0] and len(corpus.texts[0]) <= MAX_PASSAGE_CHARS


def test_oversized_upload_and_too_many_passages_are_refused():
    with pytest.raises(CorpusError, match="the limit is 5 MB"):
        parse_upload("big.txt", b"x" * (MAX_UPLOAD_BYTES + 1))
    with pytest.raises(CorpusError, match="2,001 passages"):
        parse_upload("many.txt", b"\n\n".join([b"word"] * 2001))


def test_long_passages_are_cut_at_whitespace_under_the_link_limit():
    words = " ".join(f"word{i}" for i in range(1000))
    pieces = split_long(words)
    assert all(0 < len(p) <= MAX_PASSAGE_CHARS for p in pieces)
    assert " ".join(pieces) == words
    assert split_long("x" * 4500) == ["x" * 2000, "x" * 2000, "x" * 500]


def test_english_corpus_is_24_passages_under_the_limit():
    corpus = english()
    assert len(corpus.texts) == 24
    assert all(100 <= len(t.split()) <= 300 and len(t) <= MAX_PASSAGE_CHARS for t in corpus.texts)
    assert corpus.key == english().key and corpus.head(3).texts == corpus.texts[:3]
    assert Corpus("english", corpus.texts[:3], "").key != corpus.key


def test_tail_starts_at_a_line_that_begins_with_a_non_space():
    text = "alpha\n  beta\n\ngamma\ndelta\n"
    start = tail_start(text, 10)
    assert start <= len(text) - 10 and text[start - 1] == "\n" and not text[start].isspace()
    assert text[start:] == "gamma\ndelta\n"


def test_held_out_text_is_the_tail_of_the_full_tokenization(bundled):
    tokenizer = bundled.tokenizer
    text = "\n".join(f"def f{i}(x):\n    return x + {i}  # line {i}" for i in range(300))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    tail = held_out_text(tokenizer, text, len(ids))
    assert tail == tokenizer.decode(ids[-(len(ids) // 50) :])
