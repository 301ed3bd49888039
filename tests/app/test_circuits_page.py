"""AppTest: the circuits page on the bundled model (copying task), bad inputs and an encoder."""

import html
import json
import re

import numpy as np

from models.circuits import CircuitTask, baseline, copying_task, head_effects, prepare
from models.head import Head
from tests.app.helpers import open_app, open_page, texts
from ui.keys import Circuits
from ui.state.circuits import OWN, CircuitsState

PAGE = "pages/circuits.py"


def own(clean: str, corrupted: str, answer: str = "\n", wrong: str = " +") -> dict:
    """Session state that opens the page on the visitor's own task."""
    return {
        Circuits.STATE: CircuitsState(preset=OWN, task=CircuitTask(clean, corrupted, answer, wrong))
    }


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
    sizes = np.abs(table["patch_effect"].to_numpy())  # strongest first, helping or hurting
    assert (np.diff(sizes) <= 1e-12).all()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Clean LD"] == f"{base.ld_clean:.3f}"
    link = table["open"].iloc[0]
    assert "layer=2&head=2" in link and "model=bundled" in link and "prompt=" in link
    assert at.selectbox(key=Circuits.HEAD).value == Head(2, 2)


def test_mismatched_lengths_are_explained(bundled):
    at = open_page(PAGE, "bundled", **own("x = foo(1)", "x = foobarbaz(1, 2)"))
    assert not at.exception
    said = "\n".join(str(e.value) for e in at.error)
    assert "same number of tokens" in said and "corrupted prompt" in said
    assert not at.dataframe


def test_multi_token_answer_is_explained(bundled):
    at = open_page(PAGE, "bundled", **own("x = foo(1)", "x = bar(1)", answer=" xyzqq"))
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


def test_a_bare_answer_is_flagged_and_one_click_puts_the_space_back(bundled):
    """Issue 23, item 5: the preset's answer retyped without its leading space."""
    task = copying_task(bundled)
    assert task.answer.startswith(" ")
    bare = CircuitTask(task.clean, task.corrupted, task.answer.strip(), task.wrong)
    at = open_page(PAGE, "bundled", **{Circuits.STATE: CircuitsState(preset=OWN, task=bare)})
    assert not at.exception
    spaced = "␣" + bare.answer
    warned = [str(w.value) for w in at.warning if "has no leading space" in str(w.value)]
    assert len(warned) == 1 and spaced in warned[0]
    fix = at.button(key=Circuits.FIX_ANSWER)
    assert fix.label == f"Use {spaced} (put the space back)"
    bare_ld = {m.label: m.value for m in at.metric}["Clean LD"]
    fix.click().run()
    assert not at.exception
    assert at.session_state[Circuits.STATE].task.answer == task.answer
    assert at.text_input(key=Circuits.ANSWER).value == task.answer
    assert not any("has no leading space" in str(w.value) for w in at.warning)
    base = baseline(bundled, prepare(bundled, task))
    assert {m.label: m.value for m in at.metric}["Clean LD"] == f"{base.ld_clean:.3f}" != bare_ld
    assert f"logit(**{spaced}**)" in texts(at)


def test_a_heads_dla_splits_by_earlier_head_and_closes_the_sum(bundled):
    at = open_app(PAGE, model="bundled")
    head = at.selectbox(key=Circuits.LOADINGS_HEAD).value
    at.button(key=Circuits.RUN_LOADINGS).click().run()
    assert not at.exception
    said = texts(at)
    found = re.search(
        rf"DLA of {head}: ([-+]\d+\.\d+) in LD\. Earlier heads carry ([-+]\d+\.\d+), the rest "
        r"([-+]\d+\.\d+); parts minus the whole: (\S+)\.",
        said,
    )
    assert found, said[-1500:]
    total, carried, rest = (float(found.group(i)) for i in (1, 2, 3))
    setup = prepare(bundled, copying_task(bundled))
    dla = baseline(bundled, setup).attribution.heads
    assert abs(total - dla[head.layer, head.index]) <= 1e-3
    assert abs(dla[head.layer, head.index]) == np.abs(dla).max()  # the strongest is offered first
    assert abs(carried + rest - total) <= 2e-4  # four decimals each
    assert abs(float(found.group(4))) <= 1e-4
    (bars,) = [
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "The rest" in json.dumps(json.loads(c.proto.spec)["layout"].get("title", ""))
    ]
    drawn = {
        html.unescape(y): x
        for trace in bars["data"]
        for y, x in zip(trace["y"], trace["x"], strict=True)
    }
    assert "MLP 0's output" in drawn and "the token embedding" in drawn  # every part has a bar
    assert abs(sum(drawn.values()) - rest) <= 1e-4  # the bars add up to the rest
