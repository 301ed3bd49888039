"""The one base class for failures whose text is written for the person using the app."""

from __future__ import annotations

from typing import ClassVar, Literal

Level = Literal["info", "warning", "error"]


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
