"""The pages' sections: what each page shows, one module per page (two for the larger ones).

- :mod:`ui.sections.sidebar` -- the page menu, the model and the prompt;
- :mod:`ui.sections.examples` -- example prompts for each model;
- :mod:`ui.sections.explorer` -- the explorer's view: grid, selectors, tokens;
- :mod:`ui.sections.explorer_detail` -- the chosen head: overview, heatmap, downloads;
- :mod:`ui.sections.explorer_results` -- what the explorer draws from a run, kept in stores;
- :mod:`ui.sections.explorer_session` -- the explorer's view in the session;
- :mod:`ui.sections.explorer_strip` -- the explorer's token strip: spans, words, rollout;
- :mod:`ui.sections.explorer_compare` -- compare mode: prompt B, every head's divergence;
- :mod:`ui.sections.explorer_compare_detail` -- compare mode: one head's A, B and A − B;
- :mod:`ui.sections.explorer_difference` -- compare mode: where A and B differ, pooled;
- :mod:`ui.sections.explorer_export` -- the explorer's view as one self-contained HTML file;
- :mod:`ui.sections.heads` -- head finder: corpus, scores, grids, table, top examples;
- :mod:`ui.sections.prune` -- head finder: importance, pruning curve, export;
- :mod:`ui.sections.circuits` -- the circuit task, activation patching, logit attribution;
- :mod:`ui.sections.circuits_session` -- the Circuits page's state in the session, its tabs;
- :mod:`ui.sections.circuits_atp` -- attribution patching (AtP, AtP*) of every head, the table;
- :mod:`ui.sections.circuits_check` -- attribution patching checked against exact patching;
- :mod:`ui.sections.circuits_paths` -- path patching from every sender into one receiver;
- :mod:`ui.sections.circuits_graph` -- the circuit graph: heads by layer, edges by strength;
- :mod:`ui.sections.circuits_weights` -- what the weights say: OV, QK, composition scores;
- :mod:`ui.sections.generate` -- the Generate page's settings and the streamed generation;
- :mod:`ui.sections.generate_steps` -- a generation step by step: tokens, rows, sinks, links;
- :mod:`ui.sections.generate_cache` -- the KV cache measured, and the eviction experiment;
- :mod:`ui.sections.scaling` -- the 1/sqrt(d_k) sweep;
- :mod:`ui.sections.kernel` -- the kernel against the model;
- :mod:`ui.sections.classroom` -- the classroom's worked steps and the real head;
- :mod:`ui.sections.classroom_topics` -- head sharing, costs, positions, failure modes.
"""
