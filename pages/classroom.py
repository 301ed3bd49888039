"""Classroom: the mathematics of attention, step by step, on numbers students can change."""

import streamlit as st

from ui import session
from ui.keys import Classroom
from ui.sections import classroom, classroom_topics

TABS = ["Step by step", "Inside the model", "MHA · GQA · MQA", "Cost", "Positions", "Failure modes"]

session.page_title("Classroom: attention, step by step")
st.caption(
    "What am I looking at: scaled dot-product attention worked through on small matrices "
    "you can edit. Change any number and every step below follows. Only the second tab "
    "runs the model loaded in the sidebar, and only when it is opened."
)
classroom.projector_options()
tabs = st.tabs(TABS, key=Classroom.TAB, on_change="rerun")  # only the open tab runs
if tabs[0].open:
    with tabs[0]:
        classroom.step_by_step()
if tabs[1].open:
    with tabs[1]:
        classroom.real_model()
if tabs[2].open:
    with tabs[2]:
        classroom_topics.head_sharing(session.load_facts())
if tabs[3].open:
    with tabs[3]:
        classroom_topics.cost_calculator(session.load_facts())
if tabs[4].open:
    with tabs[4]:
        classroom_topics.position_section()
if tabs[5].open:
    with tabs[5]:
        classroom_topics.failure_section()
