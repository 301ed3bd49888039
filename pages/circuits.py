"""Circuits: which heads cause the answer (activation patching) and which write it (direct logit
attribution)."""

import streamlit as st

from models.circuits import baseline, prepare
from models.circuits.task import check_model
from models.errors import UserError
from ui import session
from ui.runtime.jobs import Cost
from ui.sections import circuits
from ui.widgets import job_view

session.page_title("Circuits")
st.caption("Scores say what a head looks at; these tools say what it does for one answer. Give a "
           "clean prompt, a corrupted one of the same length that changes the answer, and the "
           "two tokens to compare. The logit difference LD = logit(answer) − logit(wrong) is read "
           "at the last position.")
model = session.active_model()
if model is None:
    st.stop()
try:
    check_model(model)
    task = circuits.task_inputs(model)
    setup = prepare(model, task)
    key = circuits.circuit_key(model, task)
    circuits.token_check(setup)
    base = job_view.run_job(key, "Running the clean and corrupted prompts",
                            lambda progress: baseline(model, setup, progress=progress),
                            cost=Cost(work=3 * model.facts.forward_flops(setup.n_tokens)))
except UserError as err:
    session.show_error(err)
    st.stop()
if base is job_view.MISSING:
    st.stop()
circuits.baseline_metrics(base)
effects = None
try:
    effects = circuits.patching(model, setup, key, base)
    if effects is not None:
        circuits.positions(model, setup, key, base, effects)
except UserError as err:
    session.show_error(err)
circuits.attribution(base)
circuits.head_table(model, task, base, effects)
circuits.compare_link(task)
