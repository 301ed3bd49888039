"""An exported view opens in Chromium with every request blocked, draws its heatmap and makes no
request of any kind; a prompt holding a script shows as text."""

from __future__ import annotations

import numpy as np

from viz.heatmap import head_heatmap
from viz.html_export import CSP, Caption, Strip, view_html
from viz.thumbnails import pooled_png

N = 2048
ATTACK = "</script><script>alert('prompt')</script><img src=x onerror=alert(1)>"


def export_file(tmp_path) -> tuple[str, str]:
    rng = np.random.default_rng(0)
    grid = [
        [pooled_png(np.tril(rng.random((64, 64))).astype(np.float32)) for _ in range(9)]
        for _ in range(30)
    ]
    labels = [f"({i}) w{i}" for i in range(N)]
    labels[1005] = f"(1005) {ATTACK}"
    window = rng.dirichlet(np.ones(96), size=96).astype(np.float32)
    fig = head_heatmap(
        window,
        labels,
        causal=True,
        title=f"head 3.1 {ATTACK}",
        rows=slice(1000, 1096),
        cols=slice(1000, 1096),
        selected=1005,
    )
    tokens = [f"w{i}" for i in range(N)]
    tokens[7] = ATTACK
    caption = Caption(
        model="smollm2",
        prompt=ATTACK + " and more words" * 300,
        layer=3,
        head=1,
        settings={"colour scale": "sqrt"},
        link="http://127.0.0.1:8501/explorer?layer=3&head=1",
    )
    html = view_html(caption, grid, fig, Strip(tokens, rng.random(N), 7, "from"))
    path = tmp_path / "view.html"
    path.write_text(html, encoding="utf-8")
    return path.as_uri(), html


def open_blocked(browser, url: str, script: str = "() => null", ready: str | None = None):
    """Open ``url`` offline with every other request aborted.

    Returns what ``script`` read, the requests the page attempted (any, even one its
    Content-Security-Policy then stopped), those that reached the network layer (aborted
    there), the policy's refusals and the dialogs opened."""
    context = browser.new_context(viewport={"width": 1300, "height": 1800})
    attempted: list[str] = []
    reached: list[str] = []
    refused: list[str] = []
    dialogs: list[str] = []

    def route(request_route):
        if request_route.request.url == url:
            request_route.continue_()
        else:
            reached.append(request_route.request.url)
            request_route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("request", lambda request: request.url != url and attempted.append(request.url))
    page.on(
        "console", lambda msg: "Content Security Policy" in msg.text and refused.append(msg.text)
    )
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    try:
        context.set_offline(True)
        page.goto(url, wait_until="load")
        if ready:
            page.wait_for_selector(ready, timeout=30_000)
        page.wait_for_timeout(300)
        read = page.evaluate(script)
    finally:
        context.close()
    return read, attempted, reached, refused, dialogs


def test_the_check_sees_a_planted_request(browser, tmp_path):
    plain = tmp_path / "plain.html"
    plain.write_text(
        '<img src="http://203.0.113.7/x.png"><script src="https://cdn.plot.ly/a.js"></script>',
        encoding="utf-8",
    )
    _, attempted, reached, _, _ = open_blocked(browser, plain.as_uri())
    assert any("203.0.113.7" in u for u in reached) and any("cdn.plot.ly" in u for u in reached)
    assert set(reached) <= set(attempted)
    guarded = tmp_path / "guarded.html"
    guarded.write_text(
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<img src="http://203.0.113.7/x.png">',
        encoding="utf-8",
    )
    _, attempted, reached, refused, _ = open_blocked(browser, guarded.as_uri())
    assert attempted and reached == [] and refused  # the policy stops it before the network


def test_export_draws_offline_with_no_request(browser, tmp_path):
    url, html = export_file(tmp_path)
    assert len(html.encode("utf-8")) < 10 * 1024**2
    drawn, attempted, reached, refused, dialogs = open_blocked(
        browser,
        url,
        """() => {
        const plot = document.querySelector('.js-plotly-plot .main-svg')
            && document.querySelector('.js-plotly-plot');
        const images = [...document.querySelectorAll('table.grid img')];
        return {
            trace: plot && plot._fullData[0].type,
            cells: plot && plot._fullData[0].z.length,
            layer: document.querySelectorAll('.heatmaplayer image').length,
            pictures: images.length,
            loaded: images.filter(img => img.complete && img.naturalWidth > 0).length,
            strip: document.querySelector('.strip').textContent,
            caption: document.querySelector('.prompt').textContent,
        };
    }""",
        ready=".js-plotly-plot .main-svg",
    )
    assert drawn["trace"] == "heatmap" and drawn["cells"] == 96 and drawn["layer"] >= 1
    assert drawn["pictures"] == drawn["loaded"] == 30 * 9
    assert ATTACK in drawn["strip"] and drawn["caption"].startswith(ATTACK)
    assert dialogs == [] and attempted == reached == refused == []
