"""The one place that writes Streamlit's session state.

Pages read the session freely, but write it only through these three verbs, so that what a
page keeps is always its frozen state value (or one of the few flags of the session itself):

- :func:`keep` -- keep a value under a key (a page's state value, a session flag);
- :func:`seed_widgets` -- set widgets' values from the page's state value just before they are
  drawn, so that the widget displays the state rather than owning it;
- :func:`forget` -- drop a key.

``tests/test_layout.py`` fails when any other module of the Streamlit side assigns to, deletes
from or mutates ``st.session_state``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import streamlit as st

V = TypeVar("V")


def keep(key: str, value: V) -> V:
    """Keep ``value`` under ``key`` and return it."""
    st.session_state[key] = value
    return value


def seed_widgets(values: Mapping[str, object]) -> None:
    """Set each widget key to the value the page's state says it shows."""
    for key, value in values.items():
        st.session_state[key] = value


def forget(key: str) -> None:
    """Drop ``key`` (nothing happens when it is not there)."""
    st.session_state.pop(key, None)
