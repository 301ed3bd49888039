"""Where Streamlit meets the core, beside ``app_state.py``: every cache and the custom components.

- :mod:`ui.caches` -- every ``st.cache_*`` of the app, with one memory policy for models;
- :mod:`ui.widgets` -- clickable views (head grid, token strip) and the address-bar sync;
- :mod:`ui.jobs` -- the bounded worker pool for heavy work (no Streamlit);
- :mod:`ui.job_view` -- a job's place, progress, time left and Cancel on the page.
"""
