from models.model.tokens import readable_token, show_whitespace


def test_byte_level_space_and_newline_become_marks():
    assert readable_token("Ġhello", byte_level=True) == "␣hello"
    assert readable_token("Ċ", byte_level=True) == "↵"
    assert readable_token("ĉ", byte_level=True) == "⇥"
    assert readable_token("ĊĊ", byte_level=True) == "↵↵"


def test_byte_level_multibyte_characters_decode():
    # "é" is the two bytes C3 A9, stored by GPT-2 as the stand-ins "Ã" and "©".
    assert readable_token("Ã©", byte_level=True) == "é"


def test_partial_utf8_bytes_show_as_hex():
    # The first byte of "…" (E2 80 A6) alone is not a whole character.
    assert readable_token("â", byte_level=True) == "\\xe2"


def test_sentencepiece_and_wordpiece_pieces():
    assert readable_token("▁the", byte_level=False) == "␣the"
    assert readable_token("##ing", byte_level=False) == "##ing"


def test_control_characters_and_empty_are_visible():
    assert show_whitespace("a\x00b") == "a␀b"
    assert show_whitespace("\x7f") == "␡"
    assert show_whitespace("") == "∅"
    assert show_whitespace("\r\n") == "␍↵"
