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


def test_labels_caption_and_letters_sit_where_they_belong(browser, tmp_path):
    """Long token labels stay inside the figure even under a template without automatic
    margins (Streamlit's, in the app); each caption label is level with its value; the marked
    head's picture carries its letters."""
    n = 30
    labels = [
        f"({i}) " + ("incomprehensibilities" * 2 if i % 4 == 0 else f"w{i}") for i in range(n)
    ]
    rng = np.random.default_rng(2)
    fig = head_heatmap(
        rng.dirichlet(np.ones(n), size=n).astype(np.float32), labels, causal=True, title="head 1.0"
    )
    fig.update_layout(template="none")  # no automargin, as under Streamlit's template
    grid = [[pooled_png(np.tril(rng.random((16, 16))).astype(np.float32))] * 3] * 2
    caption = Caption(
        model="bundled",
        prompt="p",
        layer=1,
        head=0,
        settings={"colour scale": "square root, range 0 to 1", "value-weighted": "no"},
    )
    marks = {(1, 2): ("IP", "induction, previous token")}
    html = view_html(caption, grid, fig, Strip(labels, rng.random(n), 3, "from"), marks=marks)
    assert '<span class="badge">IP</span>' in html and "I: induction; P: previous token" in html
    path = tmp_path / "labels.html"
    path.write_text(html, encoding="utf-8")
    read, *_ = open_blocked(
        browser,
        path.as_uri(),
        """() => {
        const box = (e) => e.getBoundingClientRect();
        const fig = box(document.querySelector('.js-plotly-plot'));
        const ticks = (axis) => [...document.querySelectorAll(`.${axis}tick text`)].map(box);
        const pairs = [...document.querySelectorAll('.caption dt')].map(
            (dt) => [dt.textContent, box(dt).top, box(dt.nextElementSibling).top, box(dt).height]);
        const badge = document.querySelector('table.grid .badge');
        const img = badge && badge.previousElementSibling;
        return {
            fig: [fig.left, fig.top, fig.right],
            left: Math.min(...ticks('y').map((b) => b.left)),
            top: Math.min(...ticks('x').map((b) => b.top)),
            right: Math.max(...ticks('x').map((b) => b.right)),
            n: [ticks('x').length, ticks('y').length],
            pairs,
            badge: badge && [badge.textContent, img.title, box(badge).left >= box(img).left,
                             box(badge).bottom <= box(img).bottom],
        };
    }""",
        ready=".js-plotly-plot .main-svg",
    )
    assert min(read["n"]) >= 10
    assert read["left"] >= read["fig"][0] and read["top"] >= read["fig"][1]  # none cut off
    assert read["right"] <= read["fig"][2]
    for name, dt_top, dd_top, height in read["pairs"]:
        assert abs(dt_top - dd_top) < 1 and height < 30, name  # beside its value, one line
    assert [p[0] for p in read["pairs"]][-2:] == ["colour scale", "value-weighted"]
    assert read["badge"] == ["IP", "head 1.2: induction, previous token", True, True]
