"""Head atlas: every head of the model on one map, and a card for the one you click."""

import streamlit as st

from models.errors import UserError
from ui import session
from ui.sections import atlas, atlas_card
from ui.widgets import job_view

session.page_title("Head atlas")
st.caption(
    "Every attention head of the model as a point: pick any two quantities for the axes (and "
    "colour and size), with ± 1 standard error as bars and the finder's flagged heads as "
    "diamonds. Click a head for its card: how sure each number is, where it ranks, where "
    "it fires in the corpus, and what its queries, keys, values and outputs hold."
)
model = session.active_model()
if model is None:
    st.stop()
try:
    corpus, cap = atlas.corpus_choice(model)
    if corpus is None:
        st.stop()
    found = atlas.measure(model, corpus, cap)
except UserError as err:
    session.show_error(err)
    st.stop()
if found is job_view.MISSING:
    st.stop()

found = atlas.direct_logit(model, atlas.ablation(model, corpus, cap, found))
st.caption(" · ".join(found.notes))
view = atlas.current_view(found)
atlas.axes(view)
try:
    second = atlas.second_model(model, corpus, cap)
except UserError as err:
    session.show_error(err)
    second = None
if second is None:
    atlas.scatter(found, view, atlas.HeadAtlas.MAP)
else:
    atlas.side_by_side(found, second, view)
atlas.link(view)
if view.head is not None:
    atlas_card.card(found, view.head)
else:
    st.info("Click a head on the map to open its card.")
atlas.downloads(found)
