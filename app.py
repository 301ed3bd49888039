"""Attention Atlas: explore the attention heads of pretrained transformers."""

from pathlib import Path

import streamlit as st

import app_state

st.set_page_config(page_title="Attention Atlas", page_icon=":material/visibility:", layout="wide")

ROOT = Path(__file__).resolve().parent
PAGE_FILES = [
    ("pages/explorer.py", "Explorer", ":material/grid_view:"),
    ("pages/heads.py", "Head finder", ":material/manage_search:"),
    ("pages/scaling.py", "Scaling sweep", ":material/thermostat:"),
    ("pages/kernel.py", "Kernel check", ":material/memory:"),
    ("pages/classroom.py", "Classroom", ":material/school:"),
]
PAGES = [st.Page(path, title=title, icon=icon, default=(i == 0))
         for i, (path, title, icon) in enumerate(PAGE_FILES) if (ROOT / path).exists()]

navigation = st.navigation(PAGES)
app_state.sidebar()
navigation.run()
