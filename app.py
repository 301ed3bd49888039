"""Attention Atlas: explore the attention heads of pretrained transformers."""

import streamlit as st

import app_state

st.set_page_config(page_title="Attention Atlas", page_icon="🔭", layout="wide")

PAGES = [
    st.Page("pages/explorer.py", title="Explorer", icon="🔍", default=True),
]

navigation = st.navigation(PAGES)
app_state.sidebar()
navigation.run()
