"""Task checks: equal lengths, one-token answers, the presets' token ids."""

import pytest
import torch

from models.circuits import (
    IOI,
    CircuitsUnavailable,
    CircuitTask,
    TaskError,
    copying_task,
    logit_diff,
    prepare,
    presets,
)
from models.model.forward import piece_ids

CODE = CircuitTask("def add(a, b):\n    return a +", "def add(a, c):\n    return a +", " b", " c")


def test_different_lengths_say_how_long_each_is(bundled):
    with pytest.raises(TaskError) as err:
        prepare(bundled, CircuitTask("x = foo(1)", "x = foobarbaz(1, 2)", " b", " c"))
    text = str(err.value)
    n_clean = bundled.bridge.to_tokens("x = foo(1)").shape[1]
    n_corrupted = bundled.bridge.to_tokens("x = foobarbaz(1, 2)").shape[1]
    assert f"clean prompt is {n_clean} tokens" in text
    assert f"corrupted prompt {n_corrupted}" in text and "same number of tokens" in text


def test_multi_token_answer_is_refused(bundled):
    n = len(piece_ids(bundled, " xyzqq"))
    assert n > 1
    with pytest.raises(TaskError, match=rf"answer ' xyzqq' is {n} tokens \[␣x\|"):
        prepare(bundled, CircuitTask(CODE.clean, CODE.corrupted, " xyzqq", " c"))
    with pytest.raises(TaskError, match="wrong token"):
        prepare(bundled, CircuitTask(CODE.clean, CODE.corrupted, " b", " xyzqq"))


def test_leading_space_is_added_when_it_makes_one_token(bundled):
    setup = prepare(bundled, CircuitTask(CODE.clean, CODE.corrupted, "return", " c"))
    assert piece_ids(bundled, "return") != [setup.answer_id]
    assert [setup.answer_id] == piece_ids(bundled, " return")
    assert "leading space" in setup.notes[0] and setup.answer_label == "␣return"


def test_same_tokens_and_same_prompts_are_refused(bundled):
    with pytest.raises(TaskError, match="same token"):
        prepare(bundled, CircuitTask(CODE.clean, CODE.corrupted, " b", " b"))
    with pytest.raises(TaskError, match="same tokens"):
        prepare(bundled, CircuitTask(CODE.clean, CODE.clean, " b", " c"))


def test_an_encoder_has_no_logit_difference(minilm):
    with pytest.raises(CircuitsUnavailable, match="causal"):
        prepare(minilm, IOI)


def test_logit_diff_reads_the_last_position():
    logits = torch.zeros(2, 3, 5)
    logits[0, -1, 1], logits[0, -1, 4] = 2.5, -1.0
    logits[1, 0, 1] = 9.0
    assert logit_diff(logits, 1, 4).tolist() == [3.5, 0.0]


def test_copying_task_tokenises_to_the_drawn_words(bundled):
    task = copying_task(bundled, n_words=8, seed=3)
    setup = prepare(bundled, task)
    clean = setup.clean_ids[0, 1:].tolist()
    corrupted = setup.corrupted_ids[0, 1:].tolist()
    assert setup.n_tokens == 1 + 15 and clean[8:] == clean[:7] == corrupted[8:]
    assert set(corrupted[:8]).isdisjoint(clean[:8])
    assert setup.answer_id == clean[7] and setup.wrong_id == corrupted[7]
    assert list(presets(bundled)) == ["Copying random words (induction)"]


def test_names_task_on_smollm2(smollm2):
    setup = prepare(smollm2, IOI)
    assert setup.n_tokens == 15 and setup.notes == ()
    assert (setup.answer_label, setup.wrong_label) == ("␣Mary", "␣John")
    assert next(iter(presets(smollm2))) == "Names (IOI)"
