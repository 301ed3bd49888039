"""``python -m ui.serve`` for the Generate test, with the first streamed text held: the work that
writes it (a generation, through :meth:`ui.runtime.jobs.Partial.update`) waits there until the
file named by ``ATLAS_E2E_RELEASE`` exists. The bundled model writes its whole text in a tenth
of a second on a quiet machine, well inside one redraw of the progress panel; held, it is still
writing when the panel shows its first words, however fast the machine, and the test releases
it once the page has shown them."""

import os
import sys
import threading
import time
from pathlib import Path

from ui.runtime.jobs import Partial
from ui.serve import main

RELEASE = Path(os.environ["ATLAS_E2E_RELEASE"])
HOLD_S = 300.0  # then the work goes on anyway: a test that failed before releasing it ends
POLL_S = 0.05

_first = threading.Lock()  # taken by the first text worth showing: only that one is held
_update = Partial.update


def held_update(self: Partial, text: str) -> None:
    _update(self, text)
    if str(text).strip() and _first.acquire(blocking=False):
        deadline = time.monotonic() + HOLD_S
        while not RELEASE.exists() and time.monotonic() < deadline:
            time.sleep(POLL_S)


Partial.update = held_update

if __name__ == "__main__":
    main(sys.argv[1:])
