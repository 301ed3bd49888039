"""How long work reports progress and is stopped: one callback, called often.

Every long computation takes ``progress: Progress`` and calls ``progress(fraction, text)`` at each
step (a layer, a head, a batch) with the fraction done in [0, 1] and what it is doing. The caller's
callback may raise :class:`Cancelled` to stop the work there: nothing is stored, and the model's
lock and hooks are released on the way out, because the exception unwinds through the same
``with`` blocks as any other.
"""

from __future__ import annotations

from collections.abc import Callable

from models.errors import UserError

Progress = Callable[[float, str], None]


class Cancelled(UserError):
    """The work was stopped on request; nothing partial is kept."""

    level = "info"


def quiet(_fraction: float, _text: str) -> None:
    """A progress callback that reports nowhere."""
    return None


def part(progress: Progress, start: float, span: float) -> Progress:
    """A callback for a sub-task that fills ``[start, start + span]`` of ``progress``."""
    return lambda fraction, text: progress(start + span * min(max(fraction, 0.0), 1.0), text)
