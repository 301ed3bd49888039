"""The one base class for failures whose text is written for the person using the app."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

Level = Literal["info", "warning", "error"]
_PATH = re.compile(r"(?<![\w.:/-])(?:~|\.{1,2})?(?:/[^\s/'\"`,;:()\[\]]+)+/?")


class UserError(Exception):
    """A failure the user can act on; ``str(err)`` is shown on the page as it is.

    ``level`` says how loudly: ``info`` for "nothing to show yet" (an empty prompt), ``warning``
    for "this view is not available for this model", ``error`` for "what you asked for failed".
    Pages never catch anything broader than this class.
    """

    level: ClassVar[Level] = "error"


class ModelLoadError(UserError):
    """A model could not be loaded; the previous model stays on screen."""


class PromptError(UserError, ValueError):
    """The prompt cannot be run (empty, oversized, too few tokens)."""

    level = "info"


def without_paths(text: str, named: dict[str, str] | None = None) -> str:
    """``text`` (a library's error message) with no server path in it, so a page may show it.

    Each path in ``named`` is replaced by the name the visitor knows it by; any other absolute
    path by ``…/`` and its last part (the file a reader complained about still shows).
    """
    for path, name in sorted((named or {}).items(), key=lambda item: -len(item[0])):
        if path:
            text = text.replace(path, name)
    return _PATH.sub(lambda m: "…/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)
