"""The server imports every page section before it answers, so its first visitor does not
wait for torch, plotly and the sections (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
from ui.serve import warm
assert "torch" not in sys.modules, "ui.serve alone must stay light"
warm()
import pkgutil, ui.sections
missing = [m.name for m in pkgutil.iter_modules(ui.sections.__path__)
           if f"ui.sections.{m.name}" not in sys.modules]
assert not missing, missing
assert "torch" in sys.modules and "plotly.graph_objects" in sys.modules
print("warm")
"""


def test_warm_imports_every_section_before_the_server_answers():
    done = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("warm")
