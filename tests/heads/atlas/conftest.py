"""The bundled model's atlas on a few short texts, computed once for the atlas tests."""

import pytest

from models.heads.atlas.compute import compute_atlas
from models.heads.finding.corpus import Corpus
from tests.heads.atlas.tiny import REPEATED, TEXTS


@pytest.fixture(scope="session")
def corpus():
    return Corpus("tiny", TEXTS, "four short Python snippets")


@pytest.fixture(scope="session")
def atlas(bundled, corpus):
    return compute_atlas(bundled, corpus, repeated=REPEATED)
