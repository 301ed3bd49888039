"""The Kernel check page's state as one frozen value: the kernel's dtype and the head compared.
Its link is read and written in :mod:`ui.links`. No Streamlit here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from models.attention.check import KernelDType
from models.head import Head


@dataclass(frozen=True)
class KernelView:
    """The dtype q, k and v are cast to before the kernel runs, and the head shown beside the
    model (None: the head with the largest pattern error). Its link carries every field."""

    IN_SESSION: ClassVar[frozenset[str]] = frozenset()

    dtype: KernelDType = "float32"
    head: Head | None = None


def with_dtype(view: KernelView, dtype: KernelDType) -> KernelView:
    """Run the kernel in ``dtype``; the head stays."""
    return replace(view, dtype=dtype)


def choose_head(view: KernelView, head: Head) -> KernelView:
    """Show ``head`` beside the model."""
    return replace(view, head=head)


def shown_head(view: KernelView, heads: Sequence[Head], worst: Head) -> Head:
    """The head shown: the chosen one where the report has it, else ``worst``."""
    return view.head if view.head in heads and view.head is not None else worst


def fit_dtype(view: KernelView, offered: Sequence[KernelDType]) -> tuple[KernelView, list[str]]:
    """``view`` with a dtype this server offers (float32 where it is not), with a note."""
    if view.dtype in offered:
        return view, []
    note = f"The kernel runs in {view.dtype} only on a CUDA GPU; this server uses float32."
    return replace(view, dtype="float32"), [note]
