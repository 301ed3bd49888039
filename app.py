"""Attention Atlas: explore the attention heads of pretrained transformers.

The entry point of every script run: page set-up, the server's shared runtime (started once),
the navigation and the shared sidebar, then the chosen page.
"""

import streamlit as st

from ui.widgets.frontend_code import PAGE_ICON

# The tab's icon is a file the app serves: a Material icon or an emoji here would make every
# visitor's browser fetch it from a font or emoji CDN.
st.set_page_config(page_title="Attention Atlas", page_icon=str(PAGE_ICON), layout="wide")

PAGES = [
    st.Page("pages/explorer.py", title="Explorer", icon=":material/grid_view:", default=True),
    st.Page("pages/heads.py", title="Head finder", icon=":material/manage_search:"),
    st.Page("pages/atlas.py", title="Head atlas", icon=":material/scatter_plot:"),
    st.Page("pages/circuits.py", title="Circuits", icon=":material/account_tree:"),
    st.Page("pages/generate.py", title="Generate", icon=":material/edit_note:"),
    st.Page("pages/scaling.py", title="Scaling sweep", icon=":material/thermostat:"),
    st.Page("pages/kernel.py", title="Kernel check", icon=":material/memory:"),
    st.Page("pages/classroom.py", title="Classroom", icon=":material/school:"),
]
# First, before anything slow: the app's own navigation replaces Streamlit's listing of the
# pages/ folder at once. The menu is drawn by the sidebar (client.showSidebarNavigation is off,
# so the folder listing never shows, not even on a server's first run).
navigation = st.navigation(PAGES, position="hidden")

from ui import session  # noqa: E402 - imports torch: after the navigation is in place
from ui.sections.sidebar import sidebar  # noqa: E402

session.start()
with session.guarded():  # whatever escapes a page is logged, and shown as one line
    sidebar(PAGES)
    navigation.run()
