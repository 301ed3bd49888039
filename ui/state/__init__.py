"""Each page's state as one frozen value with pure transitions (no Streamlit here).

- :mod:`ui.state.atlas` -- :class:`AtlasView`: the atlas scatter's axes and the open card;
- :mod:`ui.state.circuits` -- :class:`CircuitsState`: the task, the open tab, what each looks at;
- :mod:`ui.state.classroom` -- :class:`ClassroomView`: the open tab, text size, typed matrices
  and the window on the loaded model's head;
- :mod:`ui.state.circuits_derived` -- what the Circuits page derives from its results: defaults,
  composition edges, DLA ranks, cost sentences;
- :mod:`ui.state.explorer` -- :class:`ExplorerView`: head, query token, windows, options;
- :mod:`ui.state.generate` -- :class:`GenerateState`: settings, requests, step, head;
- :mod:`ui.state.heads` -- :class:`HeadsView`: the Head finder's corpus, settings, thresholds,
  examples, ranking and pruning;
- :mod:`ui.state.kernel` -- :class:`KernelView`: the kernel's dtype and the head compared;
- :mod:`ui.state.scaling` -- :class:`ScalingView`: the sweep's grid, head, point, loss, seed;
- :mod:`ui.state.sidebar` -- :class:`ModelChoice`: the sidebar's model source, device, dtype.
"""
