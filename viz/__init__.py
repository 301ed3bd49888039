"""Pure figure and HTML builders: plotly figures and escaped HTML, no Streamlit, no model.

- :mod:`viz.colours` -- the colour scales every figure shares (red positive, blue negative);
- :mod:`viz.heatmap` -- one head's pattern (detail window, pinned columns, colour scales) and
  per-head score grids;
- :mod:`viz.thumbnails` -- head pictures and overviews as PNG;
- :mod:`viz.token_view` -- the prompt as escaped, shaded token spans;
- :mod:`viz.export` -- CSV with spreadsheet-formula guards;
- :mod:`viz.html_export` -- a view as one self-contained HTML file (no network);
- :mod:`viz.compare_figures` -- two prompts: divergence grid and A − B heatmap;
- :mod:`viz.heads_figures` -- the head finder's pruning curve;
- :mod:`viz.atlas_figures` -- the atlas scatter: every head on any two quantities;
- :mod:`viz.circuits_figures` -- patching, attribution, paths and weight circuits;
- :mod:`viz.circuit_graph` -- the circuit graph: heads by layer, edges above a threshold;
- :mod:`viz.why_figures` -- why here: the pairs matrix, each side's parts, RoPE bands, removed
  parts, one pair over the prompt, and the view of one cell;
- :mod:`viz.generate_figures` -- generation: steps, sinks, the KV cache, eviction;
- :mod:`viz.generate_steps` -- one generation step by step: every head's row, the written
  tokens with their probabilities;
- :mod:`viz.scaling_figures` -- the 1/sqrt(d_k) sweep;
- :mod:`viz.kernel_figures` -- the kernel against the model;
- :mod:`viz.classroom_figures` -- the classroom's matrices, diagrams and cost charts.
"""
