"""SmolLM2 on a ~2,000-token prompt in Chromium: the head finder's strongest induction head,
opened in the explorer, shows its stripe without the visitor moving anything.

The prompt is a ~1,000-token English passage written twice; an induction head at the last token
of the second copy attends to the token after that token's first occurrence, ~1,000 positions
back. The detail window must contain the largest weight of the selected query's row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.capture.run import capture
from tests.e2e.conftest import HEATMAP, detail_heatmap, settle, shoot
from ui.runtime.prompt_store import PromptStore
from ui.runtime.settings import Settings

pytestmark = pytest.mark.e2e

ENGLISH = (
    Path(__file__).resolve().parents[2] / "models" / "heads" / "finding" / "corpora" / "english.txt"
)
TITLE = "(p) => ((p.layout && p.layout.title && p.layout.title.text) || '').replace(/<[^>]*>/g, '')"
GRIDS = f"""() => [...document.querySelectorAll('.js-plotly-plot')].map((p) => ({{
    title: ({TITLE})(p),
    z: p._fullData && p._fullData[0]
        ? Array.from(p._fullData[0].z, (r) => Array.from(r)) : []}}))"""


def repeated_passage(model, n_tokens: int = 995) -> str:
    text = ENGLISH.read_text(encoding="utf-8")
    ids = model.tokenizer(text, add_special_tokens=False)["input_ids"][:n_tokens]
    half = model.tokenizer.decode(ids)
    return half + " " + half


def test_an_induction_head_from_the_head_finder_shows_its_stripe(page, app_url, smollm2):
    prompt = repeated_passage(smollm2)
    pid = PromptStore(Settings.from_env().cache / "prompts").save(prompt)
    page.goto(f"{app_url}/heads?model=smollm2&pid={pid}")
    page.wait_for_function(
        f"() => [...document.querySelectorAll('.js-plotly-plot')].some("
        f"(p) => ({TITLE})(p).startsWith('Induction'))",
        timeout=900_000,
    )
    settle(page, timeout=900_000)
    grid = next(g for g in page.evaluate(GRIDS) if g["title"].startswith("Induction"))
    scores = np.array(grid["z"], dtype=float)
    layer, head = np.unravel_index(np.nanargmax(scores), scores.shape)
    assert scores[layer, head] >= 0.5
    page.goto(f"{app_url}/?model=smollm2&pid={pid}&layer={layer}&head={head}")
    page.wait_for_selector(HEATMAP, timeout=900_000)
    settle(page, timeout=900_000)
    assert page.locator("h3", has_text=f"Head {layer}.{head}").count() == 1
    shot = shoot(page, "smollm2-induction-head")
    run = capture(smollm2, prompt)
    row = run.pattern(int(layer), int(head))[run.n_tokens - 1]
    shown = detail_heatmap(page)[-1]  # the last query's row, as the canvas holds it
    assert np.nanmax(shown) == pytest.approx(float(row.max()), abs=1e-5)
    strongest = int(np.argmax(row[1:])) + 1  # the stripe, besides the first-token sink
    assert strongest < run.n_tokens // 2 + 5  # it sits in the first copy, ~1,000 tokens back
    assert np.nanmax(shown) > 0 and shot.exists()
