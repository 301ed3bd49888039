"""Captured attention: the AttentionRun of a prompt, dense and factored pattern stores, pooled views.

- :mod:`models.capture.run` -- :class:`AttentionRun` and :func:`capture`;
- :mod:`models.capture.store` -- the whole pattern stack, or q, k and LSE that rebuild any window;
- :mod:`models.capture.factored` -- the long-prompt capture that fills the factored store;
- :mod:`models.capture.views` -- token colours and pooled thumbnails read from a run.
"""

from models.capture.run import AttentionRun, capture

__all__ = ["AttentionRun", "capture"]
