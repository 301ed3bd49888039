"""Scaling sweep: why attention divides q . k by sqrt(d_k), on the loaded model and on random
data."""

import streamlit as st

from ui import session
from ui.sections import scaling

session.page_title("Scaling sweep")
st.markdown(
    "If the entries of q and k are independent with variance 1, the dot product q · k is a sum "
    "of d_k such terms, so its variance is d_k and its spread grows like √d_k (about 11 at "
    "d_k = 128). Logits that far apart make the softmax put almost all weight on one key, and "
    "its Jacobian diag(p) − ppᵀ, which carries the gradient back to q and k, shrinks towards "
    "zero. Dividing by √d_k brings the variance back to 1. Below, the model's own logits are "
    "multiplied by a factor c (c = 1 is the model as trained) to watch this happen."
)
st.page_link(
    "pages/classroom.py", label="The maths step by step: Classroom", icon=":material/school:"
)
scaling.model_section()
scaling.synthetic_section()
scaling.link()
