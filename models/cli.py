"""What the command lines (``python -m models.heads``, ``.circuits``, ``.generate``,
``.capture``) share: argument errors as one line, the model argument, progress lines on stderr,
and the checks of their number arguments."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line on stderr, exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text}")
    return value


MODEL_HELP = "bundled, smollm2, a Hugging Face name, a local directory or a .gguf file"


def add_model(parser: argparse.ArgumentParser, help: str = MODEL_HELP) -> None:
    """The positional ``model`` argument every command line takes."""
    parser.add_argument("model", help=help)


Say = Callable[[str], None]  # a command's progress line, printed on stderr


def speaker(name: str) -> Say:
    """A function printing progress lines on stderr as ``[name] text``."""

    def say(text: str) -> None:
        print(f"[{name}] {text}", file=sys.stderr, flush=True)

    return say
