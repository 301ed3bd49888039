"""Classroom: the mathematics of attention, step by step, on numbers students can change."""

import streamlit as st

from ui import session
from ui.sections import classroom, classroom_topics

session.page_title("Classroom: attention, step by step")
st.caption(
    "What am I looking at: scaled dot-product attention worked through on small matrices "
    "you can edit. Change any number and every step below follows. Only the second tab "
    "runs the model loaded in the sidebar, and only when it is opened."
)
view = classroom.current_view()
classroom.projector_options(view)
tabs = classroom.tabs(view)  # only the open tab runs
if tabs["steps"].open:
    with tabs["steps"]:
        classroom.step_by_step(view)
if tabs["model"].open:
    with tabs["model"]:
        classroom.real_model(view)
if tabs["sharing"].open:
    with tabs["sharing"]:
        classroom_topics.head_sharing(session.load_facts())
if tabs["cost"].open:
    with tabs["cost"]:
        classroom_topics.cost_calculator(session.load_facts())
if tabs["positions"].open:
    with tabs["positions"]:
        classroom_topics.position_section()
if tabs["failures"].open:
    with tabs["failures"]:
        classroom_topics.failure_section()
classroom.link(classroom.current_view())
