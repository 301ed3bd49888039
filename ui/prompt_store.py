"""Prompts too long for a link, kept on the server under their content hash.

A share link carries ``pid=<hash>`` instead of the text. The text lives in the app's cache
directory (``prompts/<hash>.txt``), so links survive a restart of the same server; at most
:data:`MAX_FILES` prompts are kept (the oldest go first). A link whose prompt is not here (another
server, or pruned) is reported as such, never replaced silently. No Streamlit here.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path

from models.model.forward import MAX_PROMPT_CHARS
from models.model.gguf import cache_dir

MAX_FILES = 1000
_ID = re.compile(r"^[0-9a-f]{16}$")
_lock = threading.Lock()


def prompt_id(text: str) -> str:
    """16 hex digits of the text's SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def folder() -> Path:
    return cache_dir() / "prompts"


def save(text: str) -> str:
    """Keep ``text`` and return its id (idempotent)."""
    if len(text) > MAX_PROMPT_CHARS:
        raise ValueError("prompt too long to store")
    pid = prompt_id(text)
    path = folder() / f"{pid}.txt"
    with _lock:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
            _prune()
        else:
            os.utime(path)
    return pid


def load(pid: str) -> str | None:
    """The stored text for ``pid``, or None when this server does not hold it."""
    if not _ID.match(pid or ""):
        return None
    path = folder() / f"{pid}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    return text if prompt_id(text) == pid else None


def _prune() -> None:
    files = sorted(folder().glob("*.txt"), key=lambda p: p.stat().st_mtime)
    for old in files[: max(0, len(files) - MAX_FILES)]:
        old.unlink(missing_ok=True)
