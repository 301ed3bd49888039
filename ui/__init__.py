"""The Streamlit side of the app: only this package and ``pages/`` import Streamlit.

- :mod:`ui.session` -- where Streamlit meets the core: this session's model (through the
  operator's policy) and run, links, and the one error renderer;
- :mod:`ui.session_state` -- the one place that writes Streamlit's session state: a page's
  state value kept, widgets seeded from it, a key forgotten;
- :mod:`ui.links` -- every page's link: the query string read into, and written from, the
  page's state value;
- :mod:`ui.keys` -- every session-state key, a class per page;
- :mod:`ui.text` -- visitor text made safe for Streamlit's markdown;
- :mod:`ui.serve` -- starts the web server (``make run``, ``make serve-class``);
- :mod:`ui.state` -- each page's state as a frozen value with pure transitions;
- :mod:`ui.sections` -- the pages' sections, grouped by page;
- :mod:`ui.widgets` -- browser components, the job panel and small renderers;
- :mod:`ui.runtime` -- the server runtime shared by every session: settings, the policy door,
  models, the job pool, the stores and the janitor.
"""
