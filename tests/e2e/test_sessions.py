"""Eight browser sessions at once on one server and one cached model."""

from urllib.parse import quote

import numpy as np
import pytest

from models.capture.run import capture
from tests.e2e.conftest import HEATMAP, detail_heatmap, settle

pytestmark = pytest.mark.e2e

PROMPTS = [f"session {i}: " + "to be or not to be " * (i + 1) for i in range(8)]


def test_eight_sessions_see_their_own_patterns(browser, app_url, bundled):
    contexts = [browser.new_context(viewport={"width": 1200, "height": 1400}) for _ in PROMPTS]
    pages = [context.new_page() for context in contexts]
    try:
        for i, (page, prompt) in enumerate(
            zip(pages, PROMPTS, strict=True)
        ):  # all in flight together
            page.goto(
                f"{app_url}/?model=bundled&layer={i % 3}&head={i % 4}&prompt={quote(prompt)}",
                wait_until="commit",
            )
        for i, (page, prompt) in enumerate(zip(pages, PROMPTS, strict=True)):
            page.wait_for_selector(HEATMAP, timeout=240_000)
            settle(page)
            assert page.locator('[data-testid="stException"]').count() == 0
            shown = detail_heatmap(page)  # the weights the canvas holds, NaN where masked
            expected = capture(bundled, prompt).pattern(i % 3, i % 4)
            seen = np.tril(np.ones_like(expected, dtype=bool))
            np.testing.assert_allclose(shown[seen], expected[seen], atol=1e-6)
            assert np.isnan(shown[~seen]).all()
    finally:
        for context in contexts:
            context.close()
