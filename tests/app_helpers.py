"""AppTest helpers: run the real app.py with a query string, as a browser would open it."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def open_app(page: str | None = None, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.run()
    if page is not None:
        at.switch_page(page)
        at.run()
    return at


def texts(at: AppTest) -> str:
    """Everything the page says in messages, captions and markdown, joined."""
    parts = []
    for kind in ("error", "warning", "info", "success", "caption", "markdown", "title",
                 "subheader"):
        parts += [str(el.value) for el in getattr(at, kind)]
    return "\n".join(parts)

