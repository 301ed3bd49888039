"""AppTest helpers: run the real app.py with a query string, as a browser would open it."""

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.runtime import server
from ui.runtime.settings import Settings

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def operator_settings() -> None:
    """Restart the server's runtime when a test changed an ``ATLAS_*`` variable, as an operator
    restarting the server with new settings would."""
    wanted = Settings.from_env()
    if server.current().settings != wanted:
        server.restart(wanted)


def open_app(page: str | None = None, **query) -> AppTest:
    operator_settings()
    at = AppTest.from_file(APP, default_timeout=240)
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.run()
    if page is not None:
        at.switch_page(page)
        at.run()
    return at


def shown(markdown: str) -> str:
    """What a reader sees of markdown source: backslash escapes of punctuation removed."""
    return re.sub(r"\\([\\`*_{}\[\]()#+\-.!|<>~:$&=])", r"\1", markdown)


def texts(at: AppTest) -> str:
    """Everything the page says in messages, captions and markdown, joined (as shown)."""
    parts = []
    for kind in (
        "error",
        "warning",
        "info",
        "success",
        "caption",
        "markdown",
        "title",
        "subheader",
    ):
        parts += [shown(str(el.value)) for el in getattr(at, kind)]
    return "\n".join(parts)


def open_page(page: str, model: str, **state) -> AppTest:
    """Open the app on ``model``, preset session ``state``, then switch to ``page``.

    The state is set before the switch: AppTest drops the sidebar's widgets from its tree after
    ``switch_page``, so a later widget change would lose the sidebar's model and prompt.
    """
    at = open_app(model=model)
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(page)
    at.run()
    return at
