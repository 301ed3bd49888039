"""Text a visitor typed or a link carried, made safe to show through Streamlit's markdown.

``st.info``, ``st.caption`` and friends render markdown: a model name such as
``[Session expired](https://evil.example)`` would become a link, ``![t](https://...)`` would make
the browser fetch an image, ``:red[...]`` would style text. Every character markdown gives a
meaning to is backslash-escaped, so it shows as itself. No Streamlit here.
"""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$&=])")


def md(text: object) -> str:
    """``text`` with every markdown-significant character escaped (shown literally)."""
    return _SPECIAL.sub(r"\\\1", str(text))
