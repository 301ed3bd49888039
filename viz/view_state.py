"""The shareable view: which model, prompt, layer, head and token a URL opens.

Pure functions so that a link a teacher shares round-trips exactly, and garbage in a query string
is clamped or dropped with a note instead of raising.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

QUERY_KEYS = ("model", "prompt", "pid", "layer", "head", "token")


@dataclass(frozen=True)
class ViewState:
    """What the explorer shows. ``token`` is a query position or ``None`` for no selection.

    A prompt travels as text (``prompt``) or, when too long for a link, as the id under which
    the server keeps it (``prompt_id``).
    """

    model: str | None = None
    prompt: str | None = None
    prompt_id: str | None = None
    layer: int = 0
    head: int = 0
    token: int | None = None


def _parse_int(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        return None


def from_query(params: Mapping[str, str]) -> tuple[ViewState, list[str]]:
    """Parse query parameters; unparseable numbers are dropped with a note."""
    notes: list[str] = []
    values: dict[str, int | None] = {}
    for key in ("layer", "head", "token"):
        raw = params.get(key)
        value = _parse_int(raw)
        if raw is not None and value is None:
            notes.append(f"Ignored {key}={raw!r} in the link: not a whole number.")
        values[key] = value
    state = ViewState(
        model=params.get("model") or None,
        prompt=params.get("prompt"),
        prompt_id=params.get("pid") or None,
        layer=values["layer"] or 0,
        head=values["head"] or 0,
        token=values["token"],
    )
    return state, notes


def clamp(state: ViewState, n_layers: int, n_heads: int, n_tokens: int
          ) -> tuple[ViewState, list[str]]:
    """Bring layer, head and token into range for a model and prompt, noting each change."""
    notes: list[str] = []

    def fit(name: str, value: int, size: int) -> int:
        if 0 <= value < size:
            return value
        fixed = min(max(value, 0), size - 1)
        notes.append(f"The link asked for {name} {value}, which does not exist here; "
                     f"showing {name} {fixed} (valid: 0 to {size - 1}).")
        return fixed

    layer = fit("layer", state.layer, n_layers)
    head = fit("head", state.head, n_heads)
    token = state.token
    if token is not None and n_tokens > 0:
        token = fit("token", token, n_tokens)
    return replace(state, layer=layer, head=head, token=token), notes


def to_query(state: ViewState) -> dict[str, str]:
    """Query parameters for ``state``; unset fields are left out."""
    out: dict[str, str] = {"layer": str(state.layer), "head": str(state.head)}
    if state.model:
        out["model"] = state.model
    if state.prompt is not None:
        out["prompt"] = state.prompt
    elif state.prompt_id is not None:
        out["pid"] = state.prompt_id
    if state.token is not None:
        out["token"] = str(state.token)
    return out
