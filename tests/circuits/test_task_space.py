"""A typed answer without its leading space: detected when the spaced word is what the model
writes next, and shown with visible spaces."""

from models.circuits import IOI, prepare
from models.circuits.task import CircuitTask, missing_space, visible
from models.model.forward import piece_ids


def test_a_bare_word_that_is_its_own_token_is_caught(bundled):
    prompt = "x = foo(1)\nprint"
    assert len(piece_ids(bundled, "next")) == 1 and len(piece_ids(bundled, " next")) == 1
    assert missing_space(bundled, "next", prompt) == " next"
    assert missing_space(bundled, " next", prompt) is None  # already spaced
    assert missing_space(bundled, "next", prompt + " ") is None  # the prompt ends in a space
    assert missing_space(bundled, "next", prompt + "\n") is None
    assert missing_space(bundled, "", prompt) is None


def test_a_bare_word_of_several_tokens_is_left_to_the_note(bundled):
    assert len(piece_ids(bundled, "Mary")) > 1
    assert missing_space(bundled, "Mary", IOI.clean) is None


def test_ioi_on_smollm2_without_the_space_is_another_token(smollm2):
    """The issue's case: 'Mary' is one token on SmolLM2, not the one after 'to'."""
    assert missing_space(smollm2, "Mary", IOI.clean) == " Mary"
    assert missing_space(smollm2, "John", IOI.clean) == " John"
    bare = prepare(smollm2, CircuitTask(IOI.clean, IOI.corrupted, "Mary", " John"))
    spaced = prepare(smollm2, IOI)
    assert bare.answer_id != spaced.answer_id and not bare.notes
    assert (bare.answer_label, spaced.answer_label) == ("Mary", "␣Mary")


def test_spaces_are_shown():
    assert visible(" Mary") == "␣Mary" and visible("a b ") == "a␣b␣" and visible("x") == "x"
