"""Every page test starts from the environment's settings: a test that changed an ``ATLAS_*``
variable leaves no runtime with its settings behind."""

import pytest

from ui.runtime import server
from ui.runtime.settings import Settings


@pytest.fixture(autouse=True)
def default_runtime():
    yield
    if server.current().settings != Settings.from_env():
        server.restart(Settings.from_env())
