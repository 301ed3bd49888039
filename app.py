"""Attention Atlas: explore the attention heads of pretrained transformers."""

import streamlit as st

from ui.sidebar import sidebar

st.set_page_config(page_title="Attention Atlas", page_icon=":material/visibility:", layout="wide")

PAGES = [
    st.Page("pages/explorer.py", title="Explorer", icon=":material/grid_view:", default=True),
    st.Page("pages/heads.py", title="Head finder", icon=":material/manage_search:"),
    st.Page("pages/circuits.py", title="Circuits", icon=":material/account_tree:"),
    st.Page("pages/scaling.py", title="Scaling sweep", icon=":material/thermostat:"),
    st.Page("pages/kernel.py", title="Kernel check", icon=":material/memory:"),
    st.Page("pages/classroom.py", title="Classroom", icon=":material/school:"),
]

navigation = st.navigation(PAGES)
sidebar()
navigation.run()
