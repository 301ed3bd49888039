"""The one door from a visitor's request to a model: :func:`admit` turns a :class:`ModelSpec`
into an :class:`AllowedSpec`, or refuses it with a message.

The model store (:mod:`ui.runtime.models`) accepts nothing else, and only :func:`admit` can make
an ``AllowedSpec`` (its constructor refuses any caller without this module's seal), so no page,
tab or future feature can load a model the operator's policy did not let through:

- bundled, SmolLM2 and MiniLM are the server's own and always pass;
- a hub name must look like one (``owner/name``); remote code is dropped unless the operator
  allows it (``ATLAS_ALLOW_REMOTE_CODE``);
- a local directory or GGUF file must lie, once every link is followed, inside the operator's
  folders (``ATLAS_MODEL_ROOTS``), and so must every file inside such a directory; only regular
  files are read. Any other path gets the same message whether or not it exists, so the page
  never tells which server paths exist; a path with a part too long for any file system gets
  one message wherever it points, before anything looks at the disk;
- an admitted path is named to the visitor by where it lies inside its allowed folder
  (``ModelSpec.shown``), never by the server path it resolves to, and a link names it as the
  visitor wrote it.

No Streamlit here.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path

from models.errors import ModelLoadError
from models.model.spec import ModelSpec
from ui.runtime.settings import Settings

HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9._-]{1,96})?$")
MAX_FILES = 4096  # files a model directory may hold; more is not a model checkpoint
NAME_MAX, PATH_MAX = 255, 4095  # bytes of one part of a path, and of a whole path (Linux)
TOO_LONG = (
    f"A path may have at most {NAME_MAX} characters between two slashes and {PATH_MAX:,} in "
    "all; that one is longer. Type a shorter path."
)
OUTSIDE = (
    "This server loads local models only from the folders its operator allows, and that "
    "path is not in one of them. Choose a bundled model or a Hugging Face name, or ask "
    "the operator to add the folder to ATLAS_MODEL_ROOTS."
)
_SEAL = object()


@dataclass(frozen=True)
class AllowedSpec:
    """A model spec the operator's policy let through (resolved paths, remote code as allowed).

    Equal and hashable by its spec, so it keys caches. Only :func:`admit` makes one.
    """

    spec: ModelSpec
    seal: object = field(default=None, repr=False, compare=False)
    typed: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.seal is not _SEAL:
            raise TypeError("An AllowedSpec comes only from ui.runtime.policy.admit().")

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def name(self) -> str:
        """The model's name as the visitor wrote it (what a link carries), never a resolved
        server path."""
        return self.typed if self.typed is not None else self.spec.name


def admit(spec: ModelSpec, settings: Settings) -> AllowedSpec:
    """``spec`` as this server will load it for a visitor.

    Raises:
        ModelLoadError: a path outside the allowed folders (one message whether or not it
            exists), a file that is not a regular file, or not a usable hub name.
    """
    if spec.trust_remote_code and not settings.allow_remote_code:
        spec = replace(spec, trust_remote_code=False)
    kind = spec.kind
    if kind in ("bundled", "minilm", "smollm2"):
        return AllowedSpec(spec, _SEAL)
    name = spec.name.strip()
    if kind == "hub":
        if not HUB_NAME.match(name) or ".." in name:
            raise ModelLoadError(
                "That is not a Hugging Face model name (owner/name, letters, "
                "digits, '-', '_' and '.', at most 96 characters each)."
            )
        return AllowedSpec(replace(spec, name=name), _SEAL)
    if _too_long(name):
        raise ModelLoadError(TOO_LONG)
    roots = settings.roots()
    resolved = _inside_roots(name, roots)
    if kind == "gguf":
        _regular_file(resolved)
    else:
        _safe_directory(resolved, roots)
    shown = _shown(resolved, roots)
    return AllowedSpec(replace(spec, name=str(resolved), shown=shown), _SEAL, typed=name)


def _too_long(name: str) -> bool:
    """Whether a part of the path, or the whole of it, is longer than a file system allows
    (the answer does not depend on the disk)."""
    raw = os.fsencode(name)
    return len(raw) > PATH_MAX or any(len(part) > NAME_MAX for part in raw.split(b"/"))


def _shown(path: Path, roots: tuple[Path, ...]) -> str:
    """``path`` as a visitor may read it: where it lies inside its allowed folder."""
    for root in roots:
        if path == root:
            return root.name or "."
        if root in path.parents:
            return path.relative_to(root).as_posix()
    return path.name


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _inside_roots(name: str, roots: tuple[Path, ...]) -> Path:
    """The path with every link followed, when it lies in an allowed folder.

    A relative name is taken from the server's working directory; ``..`` and links are followed
    before the check, and the message is the same whether the path exists or not.
    """
    try:
        resolved = Path(name).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        raise ModelLoadError(OUTSIDE) from None
    if not _inside(resolved, roots):
        raise ModelLoadError(OUTSIDE)
    return resolved


def _regular_file(path: Path) -> None:
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        raise ModelLoadError(f"No GGUF file named {path.name} in the allowed folders.") from None
    if not stat.S_ISREG(mode):
        raise ModelLoadError(f"{path.name} is not a regular file, so it is not read.")


def _safe_directory(path: Path, roots: tuple[Path, ...]) -> None:
    """Every file the loader could read in ``path`` is a regular file inside the roots.

    A missing directory passes here: the loader names it (it is inside an allowed folder).
    """
    try:
        if not path.is_dir():
            return
    except (OSError, ValueError):
        return  # unreadable here: the loader says there is no such directory
    seen = 0
    for folder, dirs, files in os.walk(path, followlinks=False):
        for entry in dirs + files:
            seen += 1
            if seen > MAX_FILES:
                raise ModelLoadError(
                    f"{path.name} holds more than {MAX_FILES:,} files; that "
                    "is not a model checkpoint."
                )
            child = Path(folder) / entry
            try:
                target = child.resolve()
                mode = os.stat(target).st_mode
            except (OSError, RuntimeError):
                continue  # a dangling link: nothing to read
            if not _inside(target, roots):
                raise ModelLoadError(
                    f"{path.name} links to files outside the allowed folders, so it is not read."
                )
            if entry in files and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
                raise ModelLoadError(
                    f"{path.name} holds {entry}, which is not a regular file, so it is not read."
                )
