"""Classroom: the mathematics of attention, step by step, on numbers students can change."""

import streamlit as st

import app_state
from pages import _classroom_sections as sections
from pages import _classroom_topics as topics

app_state.page_title("Classroom: attention, step by step")
st.caption("Change any number and every step below follows. The maths sections work without a "
           "model; the second tab repeats the same steps inside the model loaded in the sidebar.")
tabs = st.tabs(["Step by step", "Inside the model", "MHA · GQA · MQA", "Cost", "Positions",
                "Failure modes"])
with tabs[0]:
    sections.step_by_step()
with tabs[1]:
    facts = sections.real_model()
with tabs[2]:
    topics.head_sharing(facts)
with tabs[3]:
    topics.cost_calculator(facts)
with tabs[4]:
    topics.position_section()
with tabs[5]:
    topics.failure_section()
