"""The process-wide lock every weight-loading step takes (booting, config reading, GGUF
conversion): transformers and torch patch global state while they build a model, and two builds
interleaved in two threads corrupt each other. An RLock, so a load may convert first."""

import threading

LOAD_LOCK = threading.RLock()
