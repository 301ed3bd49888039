"""The sidebar's dtype note says what this machine's hardware reports (monkeypatched here)."""

import pytest

from models.model import hardware
from models.model.hardware import LowPrecision
from tests.app.helpers import open_app, texts
from ui.keys import Sidebar
from ui.sections import sidebar as section


@pytest.fixture
def fresh(monkeypatch):
    """No hardware facts measured yet in this process."""
    monkeypatch.setattr(section, "_hardware", {})
    return monkeypatch


def test_native_bfloat16_is_the_fast_choice_with_its_measured_ratio(fresh):
    calls = []

    def rates(dtypes, size, repeats, device):
        calls.append((dtypes, device))
        return {"float32": 150.0, "bfloat16": 600.0}

    fresh.setattr(section, "low_precision", lambda d, dev: LowPrecision(d, dev, True, "AMX-BF16"))
    fresh.setattr(section, "matmul_rates", rates)
    at = open_app(model="bundled", prompt="a b c")
    expected = f"about {600.0 / 150.0:.1f}× float32's matmul rate: the fast choice."
    assert f"bfloat16: native on this CPU (AMX-BF16), {expected}" in texts(at)
    at.run()  # a rerun measures nothing again
    assert calls == [(("float32", "bfloat16"), "cpu")]
    assert at.selectbox(key=Sidebar.DTYPE).value == "float32"  # float32 stays the default


def test_emulated_bfloat16_is_said_to_be_slower_and_not_measured(fresh):
    fresh.setattr(section, "low_precision", lambda d, dev: LowPrecision(d, dev, False, "no"))
    fresh.setattr(section, "matmul_rates", lambda *a, **k: pytest.fail("measured emulated"))
    at = open_app(model="bundled", prompt="a b c")
    assert "bfloat16 is emulated on this CPU: slower than float32 here." in texts(at)


def test_the_note_follows_this_machine(fresh):
    at = open_app(model="bundled", prompt="a b c")
    native = hardware.low_precision("bfloat16").native
    said = texts(at)
    assert ("bfloat16: native on this CPU" in said) == native
    assert ("bfloat16 is emulated on this CPU" in said) == (not native)
