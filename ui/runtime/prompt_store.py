"""Prompts too long for a link, kept on the server under their content hash.

A share link carries ``pid=<hash>`` instead of the text. The text lives in the app's cache
folder (``prompts/<hash>.txt``), so links survive a restart of the same server. The store keeps
:data:`MAX_FILES` prompts by recent use (opening a link counts as use), and one visitor (a client
address, so that opening new sessions does not multiply it; a session where the address is
unknown) may add at most :data:`SESSION_SHARE` of them: past that, its own oldest prompt goes,
so one visitor pasting a thousand prompts from fresh sessions cannot push everybody else's
links out. A link whose prompt is not
here is reported as such, never replaced silently. No Streamlit here.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path

from models.model.forward import MAX_PROMPT_CHARS

MAX_FILES = 1000
SESSION_SHARE = 50
_ID = re.compile(r"^[0-9a-f]{16}$")


def prompt_id(text: str) -> str:
    """16 hex digits of the text's SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class PromptStore:
    """Long prompts in ``folder`` (see the module docstring)."""

    def __init__(
        self, folder: Path, max_files: int = MAX_FILES, share: int = SESSION_SHARE
    ) -> None:
        self.folder, self.max_files, self.share = folder, max_files, share
        self._lock = threading.Lock()
        self._added: dict[str, OrderedDict[str, None]] = {}

    def save(self, text: str, session: str = "") -> str:
        """Keep ``text`` for ``session`` (the visitor it counts against) and return its id
        (saving the same text again only marks it used)."""
        if len(text) > MAX_PROMPT_CHARS:
            raise ValueError("prompt too long to store")
        pid = prompt_id(text)
        path = self.folder / f"{pid}.txt"
        with self._lock:
            if path.exists():
                os.utime(path)
                return pid
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
            self._count(session, pid)
            self._prune()
        return pid

    def load(self, pid: str) -> str | None:
        """The stored text for ``pid`` (marking it used), or None when this server lacks it."""
        if not _ID.match(pid or ""):
            return None
        path = self.folder / f"{pid}.txt"
        try:
            text = path.read_text(encoding="utf-8")
            os.utime(path)
        except OSError:
            return None
        return text if prompt_id(text) == pid else None

    def _count(self, session: str, pid: str) -> None:
        """Remember what ``session`` added; past its share, its own oldest prompt goes."""
        if not session:
            return
        mine = self._added.setdefault(session, OrderedDict())
        mine[pid] = None
        while len(mine) > self.share:
            oldest, _ = mine.popitem(last=False)
            (self.folder / f"{oldest}.txt").unlink(missing_ok=True)

    def _prune(self) -> None:
        files = sorted(self.folder.glob("*.txt"), key=lambda p: p.stat().st_mtime)
        for old in files[: max(0, len(files) - self.max_files)]:
            old.unlink(missing_ok=True)

    def forget_session(self, session: str) -> None:
        """Stop counting a closed session's prompts (they stay, kept by recent use)."""
        with self._lock:
            self._added.pop(session, None)
