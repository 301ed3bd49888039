"""Classroom: the mathematics of attention, step by step, on numbers students can change."""

import streamlit as st

import app_state
from pages import _classroom_sections as sections
from pages import _classroom_topics as topics

TABS = ["Step by step", "Inside the model", "MHA · GQA · MQA", "Cost", "Positions",
        "Failure modes"]

app_state.page_title("Classroom: attention, step by step")
st.caption("What am I looking at: scaled dot-product attention worked through on small matrices "
           "you can edit. Change any number and every step below follows. Only the second tab "
           "runs the model loaded in the sidebar, and only when it is opened.")
tabs = st.tabs(TABS, key="classroom_tab", on_change="rerun")  # only the open tab runs
if tabs[0].open:
    with tabs[0]:
        sections.step_by_step()
if tabs[1].open:
    with tabs[1]:
        sections.real_model()
if tabs[2].open:
    with tabs[2]:
        topics.head_sharing(sections.loaded_facts())
if tabs[3].open:
    with tabs[3]:
        topics.cost_calculator(sections.loaded_facts())
if tabs[4].open:
    with tabs[4]:
        topics.position_section()
if tabs[5].open:
    with tabs[5]:
        topics.failure_section()
