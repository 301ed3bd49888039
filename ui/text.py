"""Text a visitor typed or a link carried, made safe to show through Streamlit's markdown.

``st.info``, ``st.caption`` and friends render markdown: a model name such as
``[Session expired](https://evil.example)`` would become a link, ``![t](https://...)`` would make
the browser fetch an image, ``:red[...]`` would style text. Every character markdown gives a
meaning to is backslash-escaped, so it shows as itself; inside a code span, where a backslash
would show, :func:`code` fences the text instead. No Streamlit here.
"""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$&=])")


def md(text: object) -> str:
    """``text`` with every markdown-significant character escaped (shown literally)."""
    return _SPECIAL.sub(r"\\\1", str(text))


def code(text: object) -> str:
    """``text`` as a markdown code span that shows it literally: fenced by one more backtick
    than its longest run of backticks (a backslash would show inside a code span), padded
    with a space where it starts or ends with one."""
    said = str(text).replace("\n", " ")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", said)), default=0) + 1)
    pad = " " if said.startswith("`") or said.endswith("`") else ""
    return f"{fence}{pad}{said}{pad}{fence}"
