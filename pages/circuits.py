"""Circuits: which heads cause the answer (activation patching) and which write it (direct logit
attribution)."""

import streamlit as st

import app_state
from models.circuits import baseline, prepare
from models.circuits.task import check_model
from models.errors import UserError
from pages import _circuits_sections as sections
from ui import job_view

app_state.page_title("Circuits")
st.caption("Scores say what a head looks at; these tools say what it does for one answer. Give a "
           "clean prompt, a corrupted one of the same length that changes the answer, and the "
           "two tokens to compare. The logit difference LD = logit(answer) − logit(wrong) is read "
           "at the last position.")
model = app_state.active_model()
if model is None:
    st.stop()
try:
    check_model(model)
    task = sections.task_inputs(model)
    setup = prepare(model, task)
except UserError as err:
    app_state.show_error(err)
    st.stop()
sections.token_check(setup)
try:
    base = job_view.run_job(("circuits_baseline", model.spec, task),
                            "Running the clean and corrupted prompts",
                            lambda progress: baseline(model, setup, progress=progress))
except UserError as err:
    app_state.show_error(err)
    st.stop()
if base is job_view.MISSING:
    st.stop()
sections.baseline_metrics(base)
effects = None
try:
    effects = sections.patching(model, setup, task, base)
    if effects is not None:
        sections.positions(model, setup, task, base, effects)
except UserError as err:
    app_state.show_error(err)
sections.attribution(base)
sections.head_table(model, task, base, effects)
