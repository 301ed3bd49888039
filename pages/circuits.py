"""Circuits: which heads cause the answer (activation and attribution patching), which feed which
(path patching, the circuit graph), which write it (direct logit attribution), and what the
weights say without any prompt."""

import streamlit as st

from ui import session
from ui.sections import circuits, circuits_atp, circuits_graph, circuits_paths, circuits_weights
from ui.sections.circuits_session import current_state, sync_link, tabs

session.page_title("Circuits")
st.caption(
    "Scores say what a head looks at; these tools say what it does for one answer. Give a "
    "clean prompt, a corrupted one of the same length that changes the answer, and the "
    "two tokens to compare. The logit difference LD = logit(answer) − logit(wrong) is read "
    "at the last position."
)
model = session.active_model()
if model is None:
    st.stop()
state = current_state(model)
found = circuits.task(model, state)  # the inputs, their checks, the clean and corrupted runs
tab = tabs(state)  # only the open tab runs

with tab["patching"]:
    if tab["patching"].open and (ready := circuits.ready_or_say(found)):
        circuits.patching_tab(model, ready, state)
with tab["atp"]:
    if tab["atp"].open and (ready := circuits.ready_or_say(found)):
        circuits_atp.tab(model, ready, state)
with tab["paths"]:
    if tab["paths"].open:
        ready = circuits.ready_or_say(found)
        if ready is not None:
            circuits_paths.section(model, ready, state)
        circuits_graph.section(model, ready, state)
with tab["weights"]:
    if tab["weights"].open:
        circuits_weights.section(model, state)
sync_link()  # the address bar opens this task and these choices
