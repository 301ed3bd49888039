"""The server runtime: what every browser session of one server shares. No Streamlit here.

- :mod:`ui.runtime.settings` -- :class:`Settings`, every ``ATLAS_*`` setting, read once;
- :mod:`ui.runtime.policy` -- the one door from a visitor's request to a model (AllowedSpec);
- :mod:`ui.runtime.models` -- loaded models, shared, bounded in bytes;
- :mod:`ui.runtime.store` -- the byte-bounded result store (pinned views go last);
- :mod:`ui.runtime.jobs` -- the job pool: costs checked, fair queue, progress, cancel;
- :mod:`ui.runtime.job_keys` -- every kind of costly work as a key type;
- :mod:`ui.runtime.job_work` -- the work a key stands for, computed from its fields alone;
- :mod:`ui.runtime.cluster` -- the heavy work on a Ray cluster (``ATLAS_RAY_ADDRESS``);
- :mod:`ui.runtime.kept_results` -- finished results that took a while, kept on disk;
- :mod:`ui.runtime.result_codec` -- a result as arrays and JSON, read back by its type;
- :mod:`ui.runtime.janitor` -- drops what nobody used lately and frees its memory;
- :mod:`ui.runtime.prompt_store` -- long prompts kept for ``pid=`` links;
- :mod:`ui.runtime.server` -- the one :class:`Runtime`, started from ``app.py``.
"""
