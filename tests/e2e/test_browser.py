"""What a person sees in Chromium: clicks, links, every page, and a hostile prompt."""

import html
import json
import re
from urllib.parse import quote

import pytest
from transformers import AutoTokenizer

from models.capture.run import capture
from models.model.spec import BUNDLED_DIR
from tests.e2e.conftest import HEATMAP, settle, shoot
from viz.token_view import token_spans

pytestmark = pytest.mark.e2e

PAGES = {
    "heads": "Head finder",
    "circuits": "Circuits",
    "scaling": "Scaling sweep",
    "kernel": "Kernel check",
    "classroom": "Classroom",
}


def open_view(page, app_url, **query):
    suffix = "&".join(f"{k}={quote(str(v))}" for k, v in query.items())
    page.goto(f"{app_url}/?{suffix}")
    page.wait_for_selector("button[data-head]", timeout=180_000)
    settle(page)


def exceptions(page) -> int:
    return page.locator('[data-testid="stException"]').count()


def selected_query(page) -> str:
    return page.evaluate("() => window.location.search")


def test_opens_on_the_bundled_model(page, app_url):
    open_view(page, app_url, model="bundled")
    assert page.locator("h1", has_text="Explorer").count() == 1
    config = json.loads((BUNDLED_DIR / "config.json").read_text())
    assert page.locator("button[data-head]").count() == config["n_layer"] * config["n_head"]
    assert page.locator(HEATMAP).count() == 1
    assert exceptions(page) == 0
    shoot(page, "explorer")


def test_typed_prompt_is_tokenised_and_shown(page, app_url):
    open_view(page, app_url, model="bundled")
    prompt = "for item in items:\n    print(item)"
    box = page.get_by_label("Prompt", exact=True)
    box.fill(prompt)
    box.press("Control+Enter")
    settle(page)
    tokenizer = AutoTokenizer.from_pretrained(BUNDLED_DIR)
    expected = 1 + len(tokenizer(prompt)["input_ids"])  # BOS + prompt
    assert page.locator(".tok").count() == expected
    assert "print" in page.locator(".toks").inner_text()
    assert exceptions(page) == 0


def test_clicking_a_thumbnail_opens_that_head(page, app_url):
    open_view(page, app_url, model="bundled", prompt="a b c a b c")
    page.locator("button[data-head='2.3']").click()
    settle(page)
    assert page.locator("h3", has_text="Head 2.3").count() == 1
    assert page.locator("button[data-head='2.3'].sel").count() == 1
    assert "layer=2" in selected_query(page) and "head=3" in selected_query(page)
    shoot(page, "explorer-head-2.3")


def test_the_strip_is_shaded_and_titled_as_viz_writes_it(page, app_url, bundled):
    """The browser shades the tokens from their weights; the result must be what
    viz.token_view.token_spans writes for the same row (the HTML export's strip)."""
    prompt = "one two three one two three"
    open_view(page, app_url, model="bundled", prompt=prompt, layer=1, head=2)
    run = capture(bundled, prompt)
    query = run.n_tokens - 1
    spans = token_spans(list(run.tokens), run.pattern(1, 2)[query], query, "from")
    want = [
        (html.unescape(m.group(1)), html.unescape(m.group(2)))
        for m in re.finditer(r'style="([^"]*)" title="([^"]*)"', spans)
    ]
    got = page.locator(".tok").evaluate_all(
        "els => els.map(e => [e.getAttribute('style'), e.title])"
    )
    assert len(want) == run.n_tokens
    assert [tuple(g) for g in got] == want
    assert page.locator(".tok.sel").get_attribute("data-pos") == str(query)


def test_clicking_a_token_recolours_the_prompt(page, app_url):
    open_view(page, app_url, model="bundled", prompt="one two three four five")
    styles_before = page.locator(".tok").evaluate_all("els => els.map(e => e.style.background)")
    page.locator(".tok").nth(2).click()
    settle(page)
    styles_after = page.locator(".tok").evaluate_all("els => els.map(e => e.style.background)")
    assert styles_after != styles_before
    assert page.locator(".tok.sel").get_attribute("data-pos") == "2"
    assert "token=2" in selected_query(page)
    # In a causal model the tokens after the query are out of reach: no colour.
    assert all(style == "" for style in styles_after[3:])


def test_another_head_restyles_the_same_token_spans(page, app_url):
    """A click on another head recolours the strip in place: the same span elements (no new
    layout of the whole prompt), new colours, the query still outlined."""
    open_view(page, app_url, model="bundled", prompt="one two three four five six")
    tokens = page.locator(".tok")
    tokens.evaluate_all("els => els.forEach((e, i) => { e.__kept = i; })")
    before = tokens.evaluate_all("els => els.map(e => e.style.background)")
    query = page.locator(".tok.sel").get_attribute("data-pos")
    page.locator("button[data-head='1.2']").click()
    settle(page)
    assert page.locator("h3", has_text="Head 1.2").count() == 1
    assert tokens.evaluate_all("els => els.every((e, i) => e.__kept === i)")
    assert tokens.evaluate_all("els => els.map(e => e.style.background)") != before
    assert page.locator(".tok.sel").get_attribute("data-pos") == query
    assert page.locator("button[data-head='1.2'].sel").count() == 1
    assert page.locator("button.sel[data-head]").count() == 1


def test_shared_link_lands_on_the_exact_view(page, app_url):
    open_view(
        page, app_url, model="bundled", prompt="the cat and the hat", layer=1, head=3, token=4
    )
    assert page.locator("h3", has_text="Head 1.3").count() == 1
    assert page.locator(".tok.sel").get_attribute("data-pos") == "4"
    assert page.locator("button[data-head='1.3'].sel").count() == 1
    query = selected_query(page)
    assert "layer=1" in query and "head=3" in query and "token=4" in query


@pytest.mark.parametrize("path", list(PAGES))
def test_every_page_loads_without_an_exception(page, app_url, path):
    page.goto(f"{app_url}/{path}?model=bundled")
    page.wait_for_selector("h1", timeout=180_000)
    settle(page, timeout=300_000)
    assert page.locator("h1", has_text=PAGES[path]).count() >= 1
    assert exceptions(page) == 0
    shoot(page, path)


def test_html_payload_prompt_is_text_and_never_runs(page, app_url):
    payload = "<img src=x onerror=alert(1)>"
    open_view(page, app_url, model="bundled", prompt=payload)
    page.wait_for_timeout(1500)
    assert page.dialogs == []
    assert page.locator("img[src='x']").count() == 0
    assert "<img" in page.locator(".toks").inner_text()
    assert exceptions(page) == 0
    shoot(page, "html-payload")


def test_prompt_survives_a_page_switch(page, app_url):
    open_view(page, app_url, model="bundled")
    box = page.get_by_label("Prompt", exact=True)
    box.fill("kept across pages")
    box.press("Control+Enter")
    settle(page)
    page.get_by_role("link", name="Classroom").click()
    settle(page)
    assert page.get_by_label("Prompt", exact=True).input_value() == "kept across pages"
    assert exceptions(page) == 0
