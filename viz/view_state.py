"""The shareable view: which model, prompt(s), layer, head, token, mode and word view a URL opens.

Pure functions so that a link a teacher shares round-trips exactly, and garbage in a query string
is clamped or dropped with a note instead of raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal, get_args

Mode = Literal["single", "compare"]
MODES: tuple[str, ...] = get_args(Mode)
# The Generate page's settings, as models.generate.settings.GenerationSettings.to_params names
# them; carried as they are (the page parses them).
GEN_KEYS = ("n", "chat", "decoding", "temp", "top_k", "top_p", "seed")
QUERY_KEYS = (
    "model",
    "prompt",
    "pid",
    "layer",
    "head",
    "token",
    "mode",
    "b",
    "bid",
    "words",
    *GEN_KEYS,
)
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class ViewState:
    """What the explorer shows. ``token`` is a query position or ``None`` for no selection.

    A prompt travels as text (``prompt``) or, when too long for a link, as the id under which
    the server keeps it (``prompt_id``). In compare mode prompt B travels the same way
    (``b`` or ``bid``); it is left out of the link in single mode. ``words`` is the word view.
    """

    model: str | None = None
    prompt: str | None = None
    prompt_id: str | None = None
    layer: int = 0
    head: int = 0
    token: int | None = None
    mode: Mode = "single"
    prompt_b: str | None = None
    prompt_b_id: str | None = None
    words: bool = False
    gen: tuple[tuple[str, str], ...] | None = None  # the GEN_KEYS a link carries, in order


def _parse_int(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        return None


def _parse_mode(raw: str | None, notes: list[str]) -> Mode:
    if raw is None or raw.strip().lower() in ("", "single"):
        return "single"
    if raw.strip().lower() == "compare":
        return "compare"
    notes.append(f"Ignored mode={raw!r} in the link: it is 'single' or 'compare'.")
    return "single"


def _parse_flag(name: str, raw: str | None, notes: list[str]) -> bool:
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    notes.append(f"Ignored {name}={raw!r} in the link: it is 1 or 0.")
    return False


def from_query(params: Mapping[str, str]) -> tuple[ViewState, list[str]]:
    """Parse query parameters; unparseable numbers, modes and flags are dropped with a note."""
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
        mode=_parse_mode(params.get("mode"), notes),
        prompt_b=params.get("b"),
        prompt_b_id=params.get("bid") or None,
        words=_parse_flag("words", params.get("words"), notes),
        gen=tuple((key, str(params[key])) for key in GEN_KEYS if key in params) or None,
    )
    return state, notes


def clamp(
    state: ViewState, n_layers: int, n_heads: int, n_tokens: int
) -> tuple[ViewState, list[str]]:
    """Bring layer, head and token into range for a model and prompt, noting each change."""
    notes: list[str] = []

    def fit(name: str, value: int, size: int) -> int:
        if 0 <= value < size:
            return value
        fixed = min(max(value, 0), size - 1)
        notes.append(
            f"The link asked for {name} {value}, which does not exist here; "
            f"showing {name} {fixed} (valid: 0 to {size - 1})."
        )
        return fixed

    layer = fit("layer", state.layer, n_layers)
    head = fit("head", state.head, n_heads)
    token = state.token
    if token is not None and n_tokens > 0:
        token = fit("token", token, n_tokens)
    return replace(state, layer=layer, head=head, token=token), notes


def to_query(state: ViewState) -> dict[str, str]:
    """Query parameters for ``state``; unset fields (and prompt B in single mode) are left
    out."""
    out: dict[str, str] = {"layer": str(state.layer), "head": str(state.head)}
    if state.model:
        out["model"] = state.model
    if state.prompt is not None:
        out["prompt"] = state.prompt
    elif state.prompt_id is not None:
        out["pid"] = state.prompt_id
    if state.token is not None:
        out["token"] = str(state.token)
    if state.mode != "single":
        out["mode"] = state.mode
        if state.prompt_b is not None:
            out["b"] = state.prompt_b
        elif state.prompt_b_id is not None:
            out["bid"] = state.prompt_b_id
    if state.words:
        out["words"] = "1"
    out.update({key: value for key, value in state.gen or () if key in GEN_KEYS})
    return out
