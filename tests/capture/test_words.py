"""Words from sub-word pieces on each tokenizer family, and word-level attention by hand."""

from itertools import pairwise

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, normalizers
from transformers import PreTrainedTokenizerFast

from models.capture.run import capture
from models.capture.word_split import family, piece_text, split_words, word_starts
from models.capture.words import WORD_RULE, Words, merge_pattern, merge_strip, word_window

TEXT = "Hello, world! Unbelievably strong-minded  cats.\nDon't panic 3.14"
WORDS = ["Hello", ",", "world", "!", "Unbelievably", "strong", "-", "minded"]


def marker_words(pieces, special, kind):
    texts = [piece_text(p, kind, first=i == 0 or special[i - 1]) for i, p in enumerate(pieces)]
    starts = word_starts(texts, special)
    return [pieces[a:b] for a, b in pairwise(starts)]


# --- the rule on hand-made pieces, one family at a time ----------------------------------------


def test_byte_level_marks():
    pieces = [
        "<|endoftext|>",
        "Hello",
        ",",
        "Ġwor",
        "ld",
        "!",
        "ĠDon",
        "'t",
        "Ċ",
        "Ġ",
        "Ġc",
        "ats",
        "Ġ",
        "3",
        ".",
        "1",
        "4",
    ]
    special = [True] + [False] * (len(pieces) - 1)
    assert marker_words(pieces, special, "byte_level") == [
        ["<|endoftext|>"],
        ["Hello"],
        [","],
        ["Ġwor", "ld"],
        ["!"],
        ["ĠDon"],
        ["'t"],
        ["Ċ"],
        ["Ġ"],
        ["Ġc", "ats"],
        ["Ġ", "3"],
        ["."],
        ["1", "4"],
    ]


def test_byte_level_pieces_of_one_character_stay_together():
    pieces = ["Ġ", "ð", "Ł", "ĺ", "Ģ", "Ġok"]  # " 😀 ok": the emoji cut into four bytes
    assert marker_words(pieces, [False] * 6, "byte_level") == [["Ġ", "ð", "Ł", "ĺ", "Ģ"], ["Ġok"]]


def test_sentencepiece_marks():
    pieces = ["<s>", "▁Hello", ",", "▁wor", "ld", "!", "▁", "3", "▁don", "'", "t"]
    special = [True] + [False] * 10
    assert marker_words(pieces, special, "sentencepiece") == [
        ["<s>"],
        ["▁Hello"],
        [","],
        ["▁wor", "ld"],
        ["!"],
        ["▁", "3"],
        ["▁don"],
        ["'"],
        ["t"],
    ]


def test_wordpiece_marks():
    pieces = ["[CLS]", "un", "##bel", "##ie", "##va", "##bly", "strong", "-", "minded", "[SEP]"]
    special = [True] + [False] * 8 + [True]
    assert marker_words(pieces, special, "wordpiece") == [
        ["[CLS]"],
        ["un", "##bel", "##ie", "##va", "##bly"],
        ["strong"],
        ["-"],
        ["minded"],
        ["[SEP]"],
    ]


def test_family_is_read_from_the_tokenizer(bundled, minilm):
    assert family(bundled.tokenizer) == "byte_level"
    assert family(minilm.tokenizer) == "wordpiece"
    assert family(None, ["▁a", "b"]) == "sentencepiece"


# --- real tokenizers: offsets, and the marks alone agree ---------------------------------------


class WithoutOffsets:
    """The same tokenizer seen as a slow one: no offsets, only its pieces."""

    is_fast = False

    def __init__(self, tokenizer):
        self.inner, self.all_special_ids = tokenizer, tokenizer.all_special_ids

    def convert_ids_to_tokens(self, ids):
        return self.inner.convert_ids_to_tokens(ids)


@pytest.mark.parametrize(
    "name, first, last",
    [
        ("bundled", "<|endoftext|>", "14"),
        ("smollm2", "<|im_start|>", "14"),
        ("minilm", "[CLS]", "[SEP]"),
    ],
)
def test_each_family_splits_words_as_written(request, name, first, last):
    model = request.getfixturevalue(name)
    run = capture(model, TEXT)
    words = split_words(model.tokenizer, TEXT, run.token_ids, run.tokens)
    assert words.source == "offsets" and words.n_tokens == run.n_tokens
    assert words.labels[0] == first and words.labels[-1] == last
    assert list(words.labels[1:9]) == WORDS
    assert "Don" in words.labels and "cats" in words.labels and "3" in words.labels
    marks = split_words(WithoutOffsets(model.tokenizer), TEXT, run.token_ids, run.tokens)
    assert marks.source == "markers" and marks.starts == words.starts
    merged = merge_pattern(run.patterns, words)
    np.testing.assert_allclose(merged.sum(axis=-1), 1.0, atol=1e-5)
    if model.facts.causal:
        assert np.all(np.triu(merged, k=1) == 0.0)


def test_sentencepiece_offsets_from_a_metaspace_tokenizer():
    vocab = [
        ("<s>", 0.0),
        ("<unk>", 0.0),
        ("▁Hello", -1.0),
        (",", -1.0),
        ("▁wor", -1.0),
        ("ld", -1.0),
        ("!", -1.0),
        ("▁", -2.0),
        ("H", -5.0),
        ("e", -5.0),
        ("l", -5.0),
        ("o", -5.0),
        ("w", -5.0),
        ("r", -5.0),
        ("d", -5.0),
    ]
    backend = Tokenizer(models.Unigram(vocab, unk_id=1))
    backend.normalizer = normalizers.Sequence(
        [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
    )
    backend.decoder = decoders.Metaspace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", unk_token="<unk>")
    ids = [0] + tok("Hello, world!", add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["<s>", "▁Hello", ",", "▁wor", "ld", "!"]
    words = split_words(tok, "Hello, world!", ids)
    assert words.source == "offsets"
    assert words.labels == ("<s>", "Hello", ",", "world", "!")
    assert words.starts == (0, 1, 2, 3, 5, 6)
    assert split_words(WithoutOffsets(tok), "Hello, world!", ids).starts == words.starts


def test_words_map_tokens_windows_and_ids():
    words = Words((0, 1, 3, 4), ("a", "bc", "d"), "markers")
    assert words.word_of(2) == 1 and words.tokens_of(slice(1, 3)) == slice(1, 4)
    assert words.covering(slice(2, 4)) == slice(1, 3)
    assert words.keys([7, 8, 9, 10]) == [(7,), (8, 9), (10,)]
    assert words.axis_labels() == ["(0) a", "(1) bc", "(2) d"]


# --- merging by hand ---------------------------------------------------------------------------

TOY = np.array(
    [[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0], [0.2, 0.3, 0.5, 0.0], [0.1, 0.2, 0.3, 0.4]]
)
TOY_WORDS = Words((0, 1, 3, 4), ("a", "bc", "d"), "markers")


def test_hand_computed_merge_of_a_4x4_toy():
    # to = sum of columns 1 and 2; from = mean of rows 1 and 2
    expected = np.array([[1.0, 0.0, 0.0], [0.35, 0.65, 0.0], [0.1, 0.5, 0.4]])
    np.testing.assert_allclose(merge_pattern(TOY, TOY_WORDS), expected, atol=1e-12)
    assert "sum over its pieces" in WORD_RULE and "mean of its pieces' rows" in WORD_RULE


def test_strip_merge_sums_keys_and_averages_queries():
    weights = np.array([0.1, np.nan, 0.3, 0.2])
    np.testing.assert_allclose(merge_strip(weights, TOY_WORDS, "keys"), [0.1, 0.3, 0.2])
    np.testing.assert_allclose(merge_strip(weights, TOY_WORDS, "queries"), [0.1, 0.15, 0.2])
    masked = merge_strip(np.array([0.1, np.nan, np.nan, 0.2]), TOY_WORDS, "keys")
    assert np.isnan(masked[1]) and masked[2] == pytest.approx(0.2)


def test_word_window_of_a_long_prompt_store_equals_the_merged_pattern(bundled):
    run = capture(bundled, TEXT, dense_limit=0)
    assert run.factored
    words = split_words(bundled.tokenizer, TEXT, run.token_ids, run.tokens)
    whole = merge_pattern(run.pattern(2, 1), words)
    window = word_window(run, words, 2, 1, slice(4, 11), slice(2, 9))
    np.testing.assert_allclose(window, whole[4:11, 2:9], atol=1e-6)
