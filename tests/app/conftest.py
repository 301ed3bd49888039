"""Every page test starts from the environment's settings: a test that changed an ``ATLAS_*``
variable leaves no runtime with its settings behind. Nor does one test's timing reach another:
each starts with a job pool that has learnt no rate (a rate learnt from one kind of job prices
the others, :class:`ui.runtime.jobs.Throughput`)."""

import pytest

from ui.runtime import server
from ui.runtime.jobs import Throughput
from ui.runtime.settings import Settings


@pytest.fixture(autouse=True)
def default_runtime():
    server.current().pool.throughput = Throughput()
    yield
    if server.current().settings != Settings.from_env():
        server.restart(Settings.from_env())
