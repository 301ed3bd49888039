"""AppTest helpers: run the real app.py with a query string, as a browser would open it."""

import base64
import json
import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import numpy as np
from streamlit.testing.v1 import AppTest

from ui import links
from ui.keys import Classroom
from ui.runtime import server
from ui.runtime.settings import Settings
from ui.state import classroom as classroom_state

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


def component_data_all(at: AppTest, name: str) -> list[dict]:
    """The data every browser component called ``name`` was sent, in page order."""
    found: list[dict] = []

    def walk(node) -> None:
        kids = getattr(node, "children", None)
        for child in kids.values() if isinstance(kids, dict) else []:
            proto = getattr(child, "proto", None)
            if getattr(child, "type", None) == "bidi_component" and proto.component_name == name:
                found.append(json.loads(proto.json))
            walk(child)

    walk(at._tree)
    return found


def component_data(at: AppTest, name: str) -> dict:
    """The data the first browser component called ``name`` was sent."""
    found = component_data_all(at, name)
    assert found, f"no {name} on the page"
    return found[0]


def detail_heatmap(at: AppTest) -> dict:
    """The explorer's detail heatmap as the browser gets it, its bytes decoded: ``values``
    (``query key`` float32 weights, NaN masked) and ``levels`` (uint8 colour indices)."""
    found = heatmaps(at)
    assert found, "no atlas_heatmap on the page"
    return found[0]


def heatmaps(at: AppTest) -> list[dict]:
    """Every canvas heatmap on the page, in page order, decoded as :func:`detail_heatmap`
    decodes the first (compare mode draws three: A, B and A − B)."""
    found = []
    for data in component_data_all(at, "atlas_heatmap"):
        data = dict(data)
        shape = (data["n_rows"], data["n_cols"])
        data["values"] = np.frombuffer(base64.b64decode(data["values"]), "<f4").reshape(shape)
        data["levels"] = np.frombuffer(base64.b64decode(data["levels"]), np.uint8).reshape(shape)
        found.append(data)
    return found


def has_heatmap(at: AppTest) -> bool:
    """Whether the explorer drew its detail heatmap."""
    return bool(component_data_all(at, "atlas_heatmap"))


def plotly_array(array) -> np.ndarray:
    """A plotly array as the browser gets it (a list, or a base64 typed array), as floats."""
    if isinstance(array, dict):
        values = np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
        shape = [int(x) for x in str(array.get("shape", len(values))).split(",")]
        return values.reshape(shape).astype(float)
    return np.array(array, dtype=float)


def strip_weights(at: AppTest, which: int = 0) -> np.ndarray:
    """The weights a token strip (the ``which``-th on the page) was sent, float32 as the
    browser decodes them (NaN: masked)."""
    shaded = component_data_all(at, "atlas_token_strip")[which]["shaded"]
    return np.frombuffer(base64.b64decode(shaded["weights"]), "<f4").astype(np.float64)


def opened(query: dict[str, str] | str) -> links.Link:
    """What a link opens (a query dict, or a URL), its stored prompts read from this server."""
    if isinstance(query, str):
        query = dict(parse_qsl(urlsplit(query).query, keep_blank_values=True))
    return links.parse(query, server.current().prompts.load)


def open_classroom_tab(at: AppTest, label: str) -> None:
    """Open the Classroom tab called ``label`` on the next run, as a click on it would: the
    page's state value holds the open tab and the tab widget displays it."""
    by_label = {text: tab for tab, text in classroom_state.TAB_LABELS.items()}
    try:
        view = at.session_state[Classroom.VIEW]
    except KeyError:
        view = classroom_state.ClassroomView()
    at.session_state[Classroom.VIEW] = replace(view, tab=by_label[label])
