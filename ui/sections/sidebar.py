"""The shared sidebar: which model (source, device, dtype, placement) and which prompt.

Option widgets hold values (a source, a placement) and show their words through
``format_func``; a link's model and prompt seed them once per session
(:func:`ui.session.seed_from_link`).
"""

from __future__ import annotations

import threading
from typing import Any

import streamlit as st
import torch

from models.model.hardware import HalfType, LowPrecision, low_precision, matmul_rates
from models.model.spec import Device
from ui import session
from ui.keys import Sidebar
from ui.runtime import server
from ui.sections.examples import examples_for
from ui.session_state import seed_widgets
from ui.state.sidebar import (
    DTYPES,
    PLACEMENT_LABELS,
    PLACEMENTS,
    SOURCE_LABELS,
    SOURCES,
    TYPED,
    dtype_note,
    half_type,
)
from ui.text import md

NO_EXAMPLE = "—"
RATE_SIZE = 2048  # matrix edge of the once-per-process rate measurement (about 0.3 s)
RATE_REPEATS = 2
_hardware: dict[tuple[str, str], tuple[LowPrecision, dict[str, float] | None]] = {}
_hardware_lock = threading.Lock()


def devices() -> list[str]:
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def _use_example() -> None:
    choice = st.session_state.get(Sidebar.EXAMPLE)
    examples = examples_for(session.model_choice().source)
    if choice in examples:
        seed_widgets({Sidebar.PROMPT: examples[choice]})


def hardware(half: HalfType, device: Device) -> tuple[LowPrecision, dict[str, float] | None]:
    """Whether ``device`` runs ``half`` natively and, where it does, the measured matmul rates
    of float32 and ``half`` (GFLOP/s); measured once per process, not per rerun."""
    with _hardware_lock:
        if (half, device) not in _hardware:
            support = low_precision(half, device)
            rates = (
                matmul_rates(("float32", half), RATE_SIZE, RATE_REPEATS, device)
                if support.native
                else None
            )
            _hardware[(half, device)] = (support, rates)
        return _hardware[(half, device)]


def dtype_caption() -> None:
    """Whether the low-precision type is native here (the fast choice) or slower than float32."""
    choice = session.model_choice()
    dtype, device = choice.dtype, choice.device
    half = half_type(dtype)
    support, rates = hardware(half, device)
    st.caption(dtype_note(dtype, support, rates))


def menu(pages: list[Any]) -> None:
    """The app's pages as links (Streamlit's own menu is switched off: see app.py)."""
    for page in pages:
        st.page_link(page, label=page.title, icon=page.icon)
    st.divider()


def sidebar(pages: list[Any]) -> None:
    """The page menu, then model picker, device, dtype and prompt; shared by every page."""
    session.seed_from_link()
    settings = server.current().settings
    with st.sidebar:
        menu(pages)
        notice = server.current().notice
        if notice:
            st.warning(md(notice))
        st.subheader("Model")
        source = st.selectbox(
            "Source", SOURCES, key=Sidebar.SOURCE, format_func=SOURCE_LABELS.__getitem__
        )
        if source in TYPED:
            label, placeholder = TYPED[source]
            st.text_input(label, key=Sidebar.NAME, placeholder=placeholder)
        if source == "smollm2":
            st.caption(
                "SmolLM2-135M-Instruct: 30 layers × 9 heads (3 key/value heads), RoPE. "
                "The first use converts its GGUF file once (about a minute)."
            )
        cols = st.columns(2)
        cols[0].selectbox("Device", devices(), key=Sidebar.DEVICE)
        cols[1].selectbox("Dtype", DTYPES, key=Sidebar.DTYPE)
        dtype_caption()
        st.selectbox(
            "Placement",
            PLACEMENTS,
            key=Sidebar.PLACEMENT,
            format_func=PLACEMENT_LABELS.__getitem__,
            help="For models larger than one device: accelerate spreads the layers "
            "over the GPUs and the CPU.",
        )
        if source in ("hub", "local") and settings.allow_remote_code:
            st.checkbox(
                "Trust remote code",
                key=Sidebar.TRUST,
                help="Runs Python code from the model's repository on this server. The "
                "operator allowed it (ATLAS_ALLOW_REMOTE_CODE); tick it only for "
                "repositories you trust.",
            )
        st.subheader("Prompt")
        st.selectbox(
            "Examples",
            [NO_EXAMPLE, *examples_for(source)],
            key=Sidebar.EXAMPLE,
            on_change=_use_example,
        )
        st.text_area("Prompt", key=Sidebar.PROMPT, height=150)
