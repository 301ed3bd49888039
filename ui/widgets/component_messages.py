"""What each browser component may send back, checked before a page reads it.

A component's trigger values come over the websocket from the browser, and anything can send
them: a message is JSON, so a head may arrive as ``"-1.x"`` or ``5``, a position as ``"abc"``,
a span without its ``stop``. Each component's messages have one checker here that returns the
value in its expected shape, or None for anything else, so a page's callback never parses
visitor input itself. Ranges beyond the view (a head past the last layer, a position past the
last token) are the view state's to clamp; these checks only make them numbers of the right
kind. No Streamlit here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MAX_POSITION = 1 << 24  # no prompt the app runs has this many tokens
_HEAD = re.compile(r"^\d{1,6}\.\d{1,6}$")

Message = str | int | bool | dict[str, int]  # what a checker lets through
Check = Callable[[Any], Message | None]


def head_id(raw: Any) -> str | None:
    """A head as ``L.H`` (what the head grid sends)."""
    if isinstance(raw, str) and _HEAD.match(raw.strip()):
        return raw.strip()
    return None


def position(raw: Any) -> int | None:
    """A position in what the component shows (a token, a word, a step)."""
    if type(raw) is int and 0 <= raw < MAX_POSITION:
        return raw
    return None


def positions(*names: str) -> Callable[[Any], dict[str, int] | None]:
    """A mapping holding each of ``names`` as a position (extra keys are dropped)."""

    def check(raw: Any) -> dict[str, int] | None:
        if not isinstance(raw, dict):
            return None
        found = {name: position(raw.get(name)) for name in names}
        if any(value is None for value in found.values()):
            return None
        return {name: int(value) for name, value in found.items() if value is not None}

    return check


def flag(raw: Any) -> bool | None:
    return raw if isinstance(raw, bool) else None


SENDS: dict[str, dict[str, Check]] = {
    "head_grid": {"clicked": head_id, "missing": flag},
    "token_strip": {"clicked": position, "span": positions("start", "stop")},
    "overview": {"picked": positions("q0", "q1", "k0", "k1")},
    "map_pictures": {"missing": flag},
    "heatmap": {"clicked": positions("query", "key")},
}


def checked(component: str | None, trigger: str, raw: Any) -> Message | None:
    """``raw`` as ``component`` may send it under ``trigger``, or None."""
    check = SENDS.get(component or "", {}).get(trigger)
    return None if check is None or raw is None else check(raw)
