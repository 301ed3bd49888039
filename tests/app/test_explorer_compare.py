"""The explorer's compare mode, word view, spans, rollout and HTML export, through AppTest.

Numbers shown are checked against computations done here: the divergence table against
``head_divergence`` on runs captured directly, word and span weights against plain NumPy on the
captured token pattern.
"""

import re
from dataclasses import replace

import numpy as np
import pytest

from models.capture.compare import head_divergence
from models.capture.rollout import rollout_weights
from models.capture.run import capture
from models.capture.spans import SPAN_RULE
from models.capture.words import WORD_RULE
from models.cost import Cost
from models.head import Head
from tests.app.helpers import (
    component_data,
    detail_heatmap,
    heatmaps,
    open_app,
    opened,
    shown,
    strip_weights,
    texts,
)
from ui.keys import Explorer, Session
from ui.sections import explorer_strip as strip
from ui.state import explorer as state
from viz.compare_figures import DIVERGENCE_FLOOR, divergence_text

A = "the cat sat on the mat because it was warm"
B = "the dog sat on the mat because it was warm"


def table(at) -> dict[str, float]:
    frame = at.dataframe[0].value
    return dict(zip(frame["L.H"], frame["divergence"], strict=True))


def test_the_divergence_table_is_head_divergence_of_the_two_runs(bundled):
    at = open_app(model="bundled", prompt=A, mode="compare", b=B, layer=1, head=2)
    assert not at.exception
    want = head_divergence(capture(bundled, A), capture(bundled, B))
    shown = table(at)
    assert len(shown) == 12
    for name, value in shown.items():
        layer, head = (int(x) for x in name.split("."))
        assert value == pytest.approx(want.divergence[layer, head], abs=1e-9)
    said = texts(at)
    assert "Equal lengths (17 tokens)" in said and "Jensen–Shannon" in said
    assert "linear-attention" not in said  # GPT-2 has none: the rule does not mention them
    assert list(shown.values()) == sorted(shown.values(), reverse=True)  # ranked


def test_a_prompt_against_itself_diverges_nowhere():
    at = open_app(model="bundled", prompt=A, mode="compare", b=A)
    assert not at.exception
    assert set(table(at).values()) == {0.0}
    diff = heatmaps(at)[2]["values"]  # A, B, then A − B
    assert np.nanmax(np.abs(diff)) == 0.0


def test_the_link_carries_the_mode_and_both_prompts():
    at = open_app(model="bundled", prompt=A, mode="compare", b=B, layer=2, head=1, token=4)
    view = at.session_state[Session.EXPLORER]
    assert (view.mode, view.prompt_b, view.head.layer, view.head.index) == ("compare", B, 2, 1)
    synced = component_data(at, "atlas_url_sync")["query"]
    parsed = opened(synced)
    view = parsed.explorer
    assert (parsed.shared.prompt, view.mode, view.prompt_b, view.head, view.token) == (
        A,
        "compare",
        B,
        Head(2, 1),
        4,
    ) and not any(parsed.notes.values())
    row = at.dataframe[0].value.iloc[0]
    linked = opened(row["link"])
    assert (linked.explorer.mode, linked.shared.prompt, linked.explorer.prompt_b) == (
        "compare",
        A,
        B,
    )
    assert str(linked.explorer.head) == row["L.H"]


def test_prompts_of_different_lengths_state_what_is_unaligned():
    at = open_app(
        model="bundled",
        prompt=A,
        mode="compare",
        b="the cat sat quietly on the big mat because it was warm",
    )
    assert not at.exception
    said = texts(at)
    assert "unaligned: A none; B " in said and "Unaligned in A: nothing; in B: “" in said
    keys = heatmaps(at)[2]["cols"]
    assert any(k.startswith("[unaligned: A none; B ") for k in keys)


CODE_A = (
    "def moving_average(values, window):\n"
    "    total = sum(values[:window])\n"
    "    return total / window\n\n"
    "def moving_average(values, window):\n"
    "    total = sum(values[:window])\n"
    "    return total / window\n"
)
CODE_B = CODE_A.replace("moving_average", "moving_sum")


def test_a_renamed_function_aligns_like_a_diff_and_the_grid_states_its_scale(bundled):
    at = open_app(model="bundled", prompt=CODE_A, mode="compare", b=CODE_B, layer=0, head=0)
    assert not at.exception
    want = head_divergence(capture(bundled, CODE_A), capture(bundled, CODE_B))
    said = texts(at)
    assert "72 of A's 78 tokens and of B's 76 aligned" in said
    assert "unaligned: A 6–8, 45–47; B 6–7, 44–45" in said
    assert "Unaligned in A: “average”, “average”; in B: “sum”, “sum”" in said
    shown = table(at)
    for name, value in shown.items():
        layer, head = (int(x) for x in name.split("."))
        assert value == pytest.approx(want.divergence[layer, head], abs=1e-9)
    top = float(want.divergence.max())
    assert top > DIVERGENCE_FLOOR  # a real change: the darkest cell is the largest head
    assert f"darkest the largest divergence: {top:.4f} bits" in said
    cells = {c["id"]: c for c in component_data(at, "atlas_head_grid")["cells"]}
    for name, cell in cells.items():
        assert cell["text"] == divergence_text(float(shown[name]), compact=False)
    keys = heatmaps(at)[2]["cols"]
    assert "[unaligned: A 6–8, 45–47; B 6–7, 44–45]" in keys
    assert "(9) (" not in keys and "(9) ( / (8) (" in keys  # A's 9 stands for B's 8


def test_rounding_noise_stays_pale_and_is_said_in_words():
    at = open_app(model="bundled", prompt=A, mode="compare", b=A)
    assert not at.exception
    cells = component_data(at, "atlas_head_grid")["cells"]
    assert {c["text"] for c in cells} == {"0"} and {c["ink"] for c in cells} == {"#222"}
    assert len({c["fill"] for c in cells}) == 1  # every head the colour of 0
    assert "identically up to rounding" in texts(at)


def test_the_word_view_merges_pieces_and_rows_still_sum_to_one(bundled):
    prompt = "the cat sat on the mat"
    at = open_app(model="bundled", prompt=prompt, words=1, layer=1, head=3, token=3)
    assert not at.exception
    drawn = detail_heatmap(at)
    assert drawn["cols"] == [
        "(0) <|endoftext|>",
        "(1) the",
        "(2) cat",
        "(3) sat",
        "(4) on",
        "(5) the",
        "(6) mat",
    ]
    shown = drawn["values"].astype(np.float64)
    np.testing.assert_allclose(np.nansum(shown, axis=1), 1.0, atol=1e-6)
    # By hand: "cat" is the pieces "c" + "at" (tokens 2 and 3); from a word = mean of its
    # pieces' rows, to a word = sum over its pieces' columns.
    pattern = capture(bundled, prompt).pattern(1, 3).astype(np.float64)
    assert bundled.tokenizer.convert_ids_to_tokens(capture(bundled, prompt).token_ids[2:4]) == [
        "Ġc",
        "at",
    ]
    assert shown[2, 2] == pytest.approx(pattern[2:4, 2:4].sum(axis=1).mean(), abs=1e-6)
    assert shown[2, 0] == pytest.approx(pattern[2:4, 0].mean(), abs=1e-6)
    assert WORD_RULE[:40] in texts(at)


def test_the_word_view_applies_to_compare_mode(bundled):
    at = open_app(model="bundled", prompt=A, mode="compare", b=B, words=1)
    assert not at.exception
    keys = heatmaps(at)[2]["cols"]
    assert "(2) cat / (2) dog" in keys  # whole words, not the pieces c + at
    assert "Alignment (words)" in texts(at)


def test_a_span_colours_the_strip_by_the_mean_of_its_rows(bundled):
    prompt = "one two three four five six"
    at = open_app(model="bundled", prompt=prompt, layer=2, head=0)
    run = capture(bundled, prompt)
    view = at.session_state[Session.EXPLORER]
    shape = state.RunShape(3, 4, run.n_tokens, view.run_id)
    at.session_state[Session.EXPLORER] = state.choose_span(view, 2, 5, shape, lambda h, t: 0)
    at.run()
    assert not at.exception
    pattern = run.pattern(2, 0).astype(np.float64)
    want = pattern[2:5].mean(axis=0)
    shown = strip_weights(at)
    assert len(shown) == run.n_tokens and np.isnan(shown[5:]).all()  # after the span
    np.testing.assert_allclose(shown[:5], want[:5], atol=1e-6)
    assert component_data(at, "atlas_token_strip")["span"] == [2, 5]
    said = texts(at)
    assert SPAN_RULE[:40] in said and "tokens 2–4" in said
    at.radio(key=Explorer.DIRECTION).set_value("to").run()
    shown = strip_weights(at)
    assert np.isnan(shown[:2]).all()  # these queries come before the span
    np.testing.assert_allclose(shown[2:], pattern[2:, 2:5].sum(axis=1), atol=1e-6)


def test_a_span_is_priced_first_and_refused_over_the_limits(bundled, monkeypatch):
    """A span over every head of a long prompt reads the whole of every pattern (on SmolLM2 at
    3,921 tokens it once held the page for 458 s): it is a job, priced before it starts, and
    refused with its reason when the estimate is over the operator's limits."""

    def cost(_facts, _n_tokens, n_span, *_rest):
        return Cost(peak_bytes=n_span * 2**30)  # the operator's 4 GiB hold a span of 4

    monkeypatch.setattr(strip, "span_cost", cost)
    prompt = "one two three four five six"
    at = open_app(model="bundled", prompt=prompt, layer=2, head=0)
    n = capture(bundled, prompt).n_tokens
    view = at.session_state[Session.EXPLORER]
    shape = state.RunShape(3, 4, n, view.run_id)
    at.session_state[Session.EXPLORER] = replace(
        state.choose_span(view, 0, n, shape, lambda h, t: 0), scope="all"
    )
    at.run()
    assert not at.exception
    said = [shown(e.value) for e in at.error]
    assert said == [
        f"Attention over the selected span would need about {n}.0 GiB of memory; this server "
        "lets one request use at most 4.0 GiB. Use a shorter text, fewer texts or a smaller "
        "batch. At most 4 tokens in the span fit this server's limits."
    ]
    assert np.isnan(strip_weights(at)).all()  # nothing computed in the page instead


def test_rollout_colours_the_strip(bundled):
    prompt = "one two three four"
    at = open_app(model="bundled", prompt=prompt, token=3)
    at.toggle(key=Explorer.ROLLOUT).set_value(True).run()
    assert not at.exception
    want = rollout_weights(capture(bundled, prompt), 3, "from")
    np.testing.assert_allclose(strip_weights(at), want, atol=1e-6)
    assert "Abnar & Zuidema" in texts(at)


def test_the_export_button_states_its_size_and_builds_one_file():
    at = open_app(model="bundled", prompt=A, layer=1, head=1)
    button = at.get("download_button")
    labels = [b.proto.label for b in button]
    export = [label for label in labels if label.startswith("Download this view as HTML")]
    assert export and re.search(r"\(\d+\.\d MB\)", export[0])


def test_the_compare_view_survives_leaving_the_page():
    at = open_app(model="bundled", prompt=A, mode="compare", b=B)
    at.text_area(key=Explorer.PROMPT_B).set_value(A.replace("cat", "rat")).run()
    at.switch_page("pages/heads.py")
    at.run()
    at.switch_page("pages/explorer.py")
    at.run()
    assert not at.exception
    assert at.text_area(key=Explorer.PROMPT_B).value == A.replace("cat", "rat")
    assert replace(at.session_state[Session.EXPLORER]).mode == "compare"


def test_the_difference_overview_is_the_pooled_absolute_difference(bundled):
    from models.capture.compare import align_runs
    from models.head import Head
    from models.progress import quiet
    from ui.sections.explorer_difference import Pair, pooled_grid

    run_a, run_b = capture(bundled, A), capture(bundled, B)
    pair = Pair(run_a, run_b, None, align_runs(run_a, run_b), None, None)
    grid, (top, query, key) = pooled_grid(pair, Head(2, 1), 8, quiet)
    diff = np.abs(run_a.pattern(2, 1).astype(np.float64) - run_b.pattern(2, 1))
    factor = -(-run_a.n_tokens // 8)  # 17 tokens: 3 per pixel, 6 pixels
    want = np.zeros((6, 6))
    for i in range(6):
        for j in range(6):
            want[i, j] = diff[i * factor : (i + 1) * factor, j * factor : (j + 1) * factor].max()
    np.testing.assert_allclose(grid, want, atol=1e-6)
    assert top == pytest.approx(diff.max(), abs=1e-6) and diff[query, key] == pytest.approx(top)


def test_the_circuits_page_links_its_pair_into_compare_mode(bundled):
    from models.circuits import copying_task

    at = open_app("pages/circuits.py", model="bundled")
    assert not at.exception
    task = copying_task(bundled)
    found = [m.value for m in at.markdown if "Compare these two prompts" in str(m.value)]
    assert len(found) == 1
    url = re.search(r"\((\./\?[^)]*)\)", found[0]).group(1)
    linked = opened(url)
    assert (
        linked.explorer.mode,
        linked.shared.prompt,
        linked.explorer.prompt_b,
        linked.shared.model,
    ) == ("compare", task.clean, task.corrupted, "bundled") and not any(linked.notes.values())


@pytest.mark.parametrize("mode", ["single", "compare"])
def test_the_exported_file_is_the_size_stated_and_holds_the_view(mode, bundled):
    from ui.sections import explorer_export

    query = {"mode": "compare", "b": B} if mode == "compare" else {"words": 1}
    at = open_app(model="bundled", prompt=A, layer=2, head=2, **query)
    label = next(
        b.proto.label
        for b in at.get("download_button")
        if b.proto.label.startswith("Download this view as HTML")
    )
    stated = float(re.search(r"\((\d+\.\d) MB\)", label).group(1))
    view = at.session_state[Session.EXPLORER]
    key = at.session_state[Session.LAST_RUN]
    html = explorer_export.build(explorer_export.ExportRequest(view, key, False, "./?x=1"))
    assert abs(len(html.encode("utf-8")) / 1e6 - stated) <= 0.1
    assert html.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in html
    assert "<dd>2.2 (layer 2, head 2)</dd>" in html and "Plotly.newPlot" in html
    if mode == "compare":
        assert "A − B" in html and "prompt B" in html and "the dog sat" in html
    else:
        assert "(2) cat" in html  # the word view's labels
    from models.heads.finding.prompt_scores import head_marks, prompt_scores
    from models.heads.table import Thresholds

    marked = head_marks(prompt_scores(capture(bundled, A)), Thresholds())
    assert marked  # the grid's letters: every marked head's picture carries them
    assert html.count('<span class="badge">') == len(marked)
    for head, letters in marked.items():
        assert f'title="head {head}: ' in html and f'<span class="badge">{letters}</span>' in html


def test_the_compare_job_aligns_once_and_a_click_does_not_realign(monkeypatch):
    from models.capture import alignment

    calls = []
    real = alignment.matching_blocks

    def counted(a, b):
        calls.append(len(a))
        return real(a, b)

    monkeypatch.setattr(alignment, "matching_blocks", counted)
    b = "the cat sat very quietly on the soft mat because it was warm there"
    at = open_app(model="bundled", prompt=A, mode="compare", b=b, layer=0, head=0)
    assert not at.exception
    assert len(calls) == 1  # in the compare job, kept with its result
    said = texts(at)
    assert "Alignment (tokens)" in said and "unaligned: A none; B " in said
    at.selectbox(key=Explorer.HEAD).set_value(3).run()
    at.selectbox(key=Explorer.LAYER).set_value(2).run()
    assert not at.exception
    assert len(calls) == 1  # layer and head changes read the stored alignment
    assert "Head 2.3" in texts(at) and "unaligned: A none; B " in texts(at)


def test_an_alignment_too_long_to_compute_is_a_message_not_a_job(monkeypatch):
    from models.capture import alignment

    monkeypatch.setattr(alignment, "MAX_EQUAL_PAIRS", 0)  # any search is too long
    b = "the dog sat on the big mat because it was warm"  # "sat on the" in both middles
    at = open_app(model="bundled", prompt=A, mode="compare", b=b)
    assert not at.exception
    said = texts(at)
    assert "lining them up would weigh" in said and "Make the prompts the same length" in said
    assert not at.dataframe  # no ranking was computed
