"""Widgets the sections are built from.

- :mod:`ui.widgets.canvas_heatmap` -- the explorer's detail heatmap, painted on a canvas in
  the browser;
- :mod:`ui.widgets.component_messages` -- what each component may send back, checked;
- :mod:`ui.widgets.components` -- clickable views (head grid, token strip, overview) and the
  address-bar sync, as Streamlit custom components;
- :mod:`ui.widgets.frontend_code` -- the components' JavaScript and CSS, read from the files in
  ``frontend/`` (linted by eslint), and the browser tab's icon;
- :mod:`ui.widgets.job_view` -- a job on a page: place in the queue, progress, Cancel;
- :mod:`ui.widgets.matrix` -- a labelled matrix of numbers.
"""
