"""Bad input, tried systematically: each case gives a clear message and the app keeps working.

The README's "Limits" table lists the same cases.
"""

import json
import shutil

import pytest

from models.model.spec import BUNDLED_DIR
from tests.app.helpers import has_heatmap, open_app, texts
from ui.keys import Sidebar

PROMPTS = {
    "one token": ("x", None),
    "emoji, CJK and right-to-left text": ("🦊 狐狸 الثعلب שועל", None),
    "NUL and control characters": ("a\x00b\x07c\x1bd\x7f", None),
    "HTML and JavaScript": ("<script>alert(1)</script><img src=x onerror=alert(2)>", None),
    "100,000 characters": ("abc " * 25_000, "only the first"),
}


@pytest.mark.parametrize("name", list(PROMPTS))
def test_prompt_cases(name):
    prompt, expected = PROMPTS[name]
    at = open_app(model="bundled", prompt=prompt)
    assert not at.exception, name
    assert has_heatmap(at), name  # the explorer still draws
    if expected:
        assert expected in texts(at)
    assert at.text_area(key=Sidebar.PROMPT).value == prompt  # nothing typed is lost


@pytest.mark.parametrize("prompt", ["", "  \n\t  "])
def test_empty_prompts(prompt):
    at = open_app(model="bundled", prompt=prompt)
    assert not at.exception
    assert "The prompt is empty" in texts(at)


def switch_model(at, source: str, name: str):
    at.selectbox(key=Sidebar.SOURCE).set_value(source).run()
    at.text_input(key=Sidebar.NAME).set_value(name).run()
    return at


def bad_dirs(tmp_path):
    not_model = tmp_path / "notes"
    not_model.mkdir()
    (not_model / "readme.txt").write_text("not a model")
    corrupt = tmp_path / "corrupt"
    shutil.copytree(BUNDLED_DIR, corrupt, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (corrupt / "model.safetensors").write_bytes(b"\x00not safetensors")
    huge = tmp_path / "huge"
    huge.mkdir()
    (huge / "config.json").write_text(
        json.dumps(
            {
                "model_type": "gpt2",
                "architectures": ["GPT2LMHeadModel"],
                "n_layer": 96,
                "n_embd": 16384,
                "n_head": 128,
                "vocab_size": 50257,
                "n_positions": 1024,
            }
        )
    )
    alien = tmp_path / "alien"
    alien.mkdir()
    (alien / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    return {"not_model": not_model, "corrupt": corrupt, "huge": huge, "alien": alien}


MODEL_CASES = {
    "unknown hub name (offline)": (
        "hub",
        "nobody/no-model-by-this-name",
        "Could not find 'nobody/no-model-by-this-name'",
    ),
    "missing directory": ("local", "missing", "No directory named missing."),
    "outside the operator's folders": ("local", "/etc", "loads local models only from the folders"),
    "not a model": ("local", "not_model", "has no config.json"),
    "corrupt safetensors": ("local", "corrupt", "Could not load"),
    "too large for memory": ("local", "huge", "GiB is free"),
    "unsupported architecture": ("local", "alien", "unreadable configuration"),
    "over-long path part in an allowed folder": ("local", "long", "at most 255 characters"),
}


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_model_cases_keep_the_previous_model(case, tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", str(tmp_path))  # the operator allows tmp_path
    source, name, expected = MODEL_CASES[case]
    dirs = {**bad_dirs(tmp_path), "missing": tmp_path / "missing", "long": tmp_path / ("a" * 300)}
    name = str(dirs[name]) if name in dirs else name
    at = open_app(model="bundled", prompt="still working")
    switch_model(at, source, name)
    assert not at.exception, case
    said = texts(at)
    assert expected in said, said
    assert "Still showing the last model that loaded" in said
    assert has_heatmap(at)  # the bundled model keeps working
    assert at.text_input(key=Sidebar.NAME).value == name


def test_remote_code_is_an_operator_setting_and_off_unless_ticked(monkeypatch):
    at = open_app(model="bundled")
    at.selectbox(key=Sidebar.SOURCE).set_value("hub").run()
    assert not [c for c in at.checkbox if c.key == Sidebar.TRUST]  # no box by default
    monkeypatch.setenv("ATLAS_ALLOW_REMOTE_CODE", "1")
    at = open_app(model="bundled")
    at.selectbox(key=Sidebar.SOURCE).set_value("hub").run()
    assert at.checkbox(key=Sidebar.TRUST).value is False
