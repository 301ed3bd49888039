"""AppTest: the circuits page on the bundled model (copying task), bad inputs and an encoder."""

import numpy as np

from models.circuits import baseline, copying_task, head_effects, prepare
from models.head import Head
from tests.app.helpers import open_app, open_page, texts
from ui.keys import Circuits

PAGE = "pages/circuits.py"
OWN = {Circuits.PRESET: "Your own prompts", Circuits.ANSWER: "\n", Circuits.WRONG: " +"}


def test_copying_task_puts_the_induction_head_on_top(bundled):
    at = open_app(PAGE, model="bundled")
    assert not at.exception
    said = texts(at)
    assert "Both prompts are **24 tokens**" in said and "Parts add up to LD" in said
    table = at.dataframe[0].value
    assert len(table) == 12 and table["L.H"].iloc[0] == "2.2"
    setup = prepare(bundled, copying_task(bundled))
    base = baseline(bundled, setup)
    expected = head_effects(bundled, setup, base)
    got = table.sort_values(["layer", "head"])["patch_effect"].to_numpy()
    np.testing.assert_allclose(got, expected.ravel(), atol=1e-5)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Clean LD"] == f"{base.ld_clean:.3f}"
    link = table["open"].iloc[0]
    assert "layer=2&head=2" in link and "model=bundled" in link and "prompt=" in link
    assert at.selectbox(key=Circuits.HEAD).value == Head(2, 2)


def test_mismatched_lengths_are_explained(bundled):
    at = open_page(PAGE, "bundled", circuits_clean="x = foo(1)",
                   circuits_corrupted="x = foobarbaz(1, 2)", **OWN)
    assert not at.exception
    said = "\n".join(str(e.value) for e in at.error)
    assert "same number of tokens" in said and "corrupted prompt" in said
    assert not at.dataframe


def test_multi_token_answer_is_explained(bundled):
    at = open_page(PAGE, "bundled", circuits_clean="x = foo(1)", circuits_corrupted="x = bar(1)",
                   **{**OWN, Circuits.ANSWER: " xyzqq"})
    assert not at.exception
    said = "\n".join(str(e.value) for e in at.error)
    assert "answer ' xyzqq' is" in said and "not one" in said


def test_an_encoder_gets_a_message():
    at = open_app(PAGE, model="minilm")
    assert not at.exception
    assert "causal" in "\n".join(str(w.value) for w in at.warning)


def test_smollm2_states_the_cost_and_waits_to_be_asked(smollm2):
    at = open_app(PAGE, model="smollm2")
    assert not at.exception
    said = texts(at)
    assert at.selectbox(key=Circuits.PRESET).value == "Names (IOI)"
    assert "270 heads in 9 batched passes of up to 32, about" in said
    assert not at.toggle(key=Circuits.PATCH).value
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Clean LD"]) > 3.0 > -3.0 > float(metrics["Corrupted LD"])
    table = at.dataframe[0].value
    assert len(table) == 270 and table["patch_effect"].isna().all()
    assert "Parts add up to LD" in said
