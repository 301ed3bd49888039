"""Start the app's web server: ``python -m ui.serve [streamlit options]`` (``make run`` and
``make serve-class`` call it).

It is ``streamlit run app.py`` with two changes made before the server starts, for a server
shared by strangers:

- Streamlit's ``/_stcore/metrics`` route (session counts and cache sizes, open to anybody who
  can reach the port) is not mounted: Streamlit 1.67 has no setting for it, so its route factory
  is replaced by one that mounts nothing;
- the app's navigation is in force from the first request: Streamlit otherwise treats an app
  with a ``pages/`` folder as a folder of independent pages until the first script run has
  called ``st.navigation``, and lists that folder in the sidebar meanwhile;
- what every script run imports (torch, plotly, every page section) is imported before
  the server answers, so its first visitor does not wait for it (:func:`warm`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

APP = Path(__file__).resolve().parents[1] / "app.py"


def no_routes(*_args: Any, **_kwargs: Any) -> list[Any]:
    return []


def warm() -> None:
    """Import the page sections (and with them torch and plotly) in the server's
    process: a script run finds them loaded, where the first one would have imported them."""
    import importlib
    import pkgutil

    import ui.sections

    for found in pkgutil.iter_modules(ui.sections.__path__):
        importlib.import_module(f"ui.sections.{found.name}")


def main(argv: list[str]) -> None:
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli
    from streamlit.web.server.starlette import starlette_app

    vars(starlette_app)["create_metrics_routes"] = no_routes  # imported there by name
    PagesManager.uses_pages_directory = False
    warm()
    sys.argv = ["streamlit", "run", str(APP), *argv]
    cli.main()


if __name__ == "__main__":
    main(sys.argv[1:])
