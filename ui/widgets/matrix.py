"""A labelled matrix on the page (escaped HTML built in ``viz.classroom_figures``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from viz.classroom_figures import matrix_html


def show(
    values: Any,
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    decimals: int,
    title: str,
    shade: bool = False,
    shade_range: tuple[float, float] | None = None,
    compact: bool = False,
) -> None:
    """A labelled matrix with its values."""
    st.markdown(
        matrix_html(
            values,
            rows,
            cols,
            decimals=decimals,
            title=title,
            shade=shade,
            shade_range=shade_range,
            compact=compact,
        ),
        unsafe_allow_html=True,
    )
