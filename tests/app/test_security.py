"""A class server that strangers share: no code runs because of a visitor, no server file is
revealed, no traceback or markdown from a visitor reaches the page, loads do not break each other.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import threading

import pytest

from models.errors import ModelLoadError
from models.model.loading import load
from models.model.spec import BUNDLED_DIR, ModelSpec
from tests.app.helpers import has_heatmap, open_app, open_classroom_tab, texts
from tests.app.test_bad_input import switch_model
from ui.keys import Sidebar
from ui.runtime import models as models_store
from ui.runtime.policy import admit
from ui.runtime.settings import Settings


def planted_code(folder, marker) -> None:
    """A model folder whose config asks for its own configuration class, which would write
    ``marker`` the moment it is imported."""
    shutil.copytree(BUNDLED_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "evil"  # a type only its own code knows
    config["auto_map"] = {
        "AutoConfig": "configuration_evil.EvilConfig",
        "AutoModelForCausalLM": "modeling_evil.EvilModel",
    }
    (folder / "config.json").write_text(json.dumps(config))
    code = f"open({str(marker)!r}, 'w').write('ran')\n"
    (folder / "configuration_evil.py").write_text(
        code + "from transformers import GPT2Config\nclass EvilConfig(GPT2Config):\n"
        "    model_type = 'evil'\n"
    )
    (folder / "modeling_evil.py").write_text(code)


class WritesAFile:
    """Unpickling this runs ``open(path, "w")``: what a malicious .bin checkpoint does."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def planted_pickle(folder, marker) -> None:
    shutil.copytree(
        BUNDLED_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__", "*.safetensors")
    )
    with open(folder / "pytorch_model.bin", "wb") as fh:
        pickle.dump({"transformer.wte.weight": WritesAFile(str(marker))}, fh)


@pytest.mark.parametrize("ticked", [False, True])
def test_model_repository_code_never_runs_for_a_visitor(tmp_path, monkeypatch, ticked):
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", str(tmp_path))
    monkeypatch.delenv("ATLAS_ALLOW_REMOTE_CODE", raising=False)
    marker = tmp_path / "code-ran.txt"
    planted_code(tmp_path / "coded", marker)
    at = open_app(model="bundled", prompt="still working")
    at.session_state[Sidebar.TRUST] = ticked  # even a forged tick changes nothing
    switch_model(at, "local", str(tmp_path / "coded"))
    assert not at.exception and not marker.exists()
    assert "own modelling code" in texts(at) and has_heatmap(at)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_pickled_checkpoint_is_never_unpickled(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", str(tmp_path))
    marker = tmp_path / "pickle-ran.txt"
    planted_pickle(tmp_path / "pickled", marker)
    at = open_app(model="bundled", prompt="still working")
    switch_model(at, "local", str(tmp_path / "pickled"))
    assert not at.exception and not marker.exists()
    assert "Still showing the last model that loaded" in texts(at)


@pytest.mark.parametrize(
    "source, name",
    [
        ("hub", "a" * 300),
        ("local", "~nosuchuser/model"),
        ("local", "/tmp/with\x00nul"),
        ("local", "/etc"),
        ("local", "/root/.ssh"),
        ("gguf", "/etc/passwd.gguf"),
        (
            "hub",
            "[Session expired](https://evil.example/login) ![t](https://evil.example/pixel.png)",
        ),
        ("hub", ":red[**ADMIN NOTICE**]"),
    ],
)
def test_visitor_input_gets_one_message_and_no_traceback(source, name):
    at = open_app(model="bundled", prompt="still working")
    switch_model(at, source, name)
    assert not at.exception
    said = texts(at)
    assert "Still showing the last model that loaded" in said and has_heatmap(at)
    for element in list(at.error) + list(at.info) + list(at.warning):
        assert "](http" not in element.value and ":red[" not in element.value


def test_existing_and_missing_server_paths_read_the_same():
    """Outside the allowed folders the page cannot tell which server paths exist."""
    said = []
    for path in ("/etc", "/no/such/folder/at/all"):
        at = open_app(model="bundled", prompt="same")
        switch_model(at, "local", path)
        said.append([e.value for e in at.error])
    assert said[0] == said[1] and said[0]


def test_a_link_with_markdown_in_the_model_name_shows_it_inert():
    at = open_app(model="[Session expired](https://evil.example/login)", prompt="x")
    assert not at.exception
    for element in list(at.error) + list(at.info) + list(at.caption):
        assert "](https://evil" not in element.value


def test_a_config_with_values_of_the_wrong_type_gives_a_message(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", str(tmp_path))
    folder = tmp_path / "typed"
    shutil.copytree(BUNDLED_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    config = json.loads((folder / "config.json").read_text())
    config.update(n_layer="three", n_head=["four"])
    (folder / "config.json").write_text(json.dumps(config))
    at = open_app(model="bundled", prompt="still working")
    switch_model(at, "local", str(folder))
    assert not at.exception and at.error and "['four']" not in texts(at)


def test_visitor_paths_resolve_to_one_spelling(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", str(tmp_path))
    (tmp_path / "m").mkdir()
    spellings = [str(tmp_path / "m"), str(tmp_path / "m") + "/", f"{tmp_path}//m/x/.."]
    settings = Settings.from_env()
    assert len({admit(ModelSpec(s), settings) for s in spellings}) == 1


@pytest.mark.slow  # loads SmolLM2
def test_concurrent_first_loads_all_succeed_and_leave_loading_working(tmp_path):
    """Four threads load four different models at once; each succeeds or fails cleanly, and a
    load afterwards still works (transformers' global patches are not left behind)."""
    broken = tmp_path / "broken"
    shutil.copytree(BUNDLED_DIR, broken, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (broken / "model.safetensors").write_bytes(b"\x00not safetensors")
    specs = [
        ModelSpec("bundled"),
        ModelSpec("minilm"),
        ModelSpec("smollm2"),
        ModelSpec(str(broken)),
    ]
    outcome: dict[str, object] = {}
    start = threading.Barrier(len(specs))

    def worker(spec: ModelSpec) -> None:
        start.wait()
        try:
            outcome[spec.name] = load(spec).facts.n_layers
        except ModelLoadError as err:
            outcome[spec.name] = err
        except Exception as err:  # noqa: BLE001 - the test reports anything else as a failure
            outcome[spec.name] = f"unexpected {type(err).__name__}: {err}"

    threads = [threading.Thread(target=worker, args=(s,)) for s in specs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert outcome["bundled"] == 3 and outcome["minilm"] == 6 and outcome["smollm2"] == 30
    assert isinstance(outcome[str(broken)], ModelLoadError)
    assert load(ModelSpec("bundled")).facts.n_layers == 3


def test_every_placement_is_checked_against_free_memory():
    from models.model.loading import check_fits

    with pytest.raises(ModelLoadError, match="GiB is free"):
        check_fits(9_700_000_000, ModelSpec("big/model", device_map="auto"))
    assert os.environ.get("ATLAS_ALLOW_REMOTE_CODE") in (None, "", "0")


PAGES = [
    "pages/explorer.py",
    "pages/heads.py",
    "pages/atlas.py",
    "pages/circuits.py",
    "pages/scaling.py",
    "pages/kernel.py",
    "pages/classroom.py",
]
CLASSROOM_TABS = [
    "Step by step",
    "Inside the model",
    "MHA · GQA · MQA",
    "Cost",
    "Positions",
    "Failure modes",
]


def visits(model: str):
    """Every page, and every classroom tab, opened with ``?model=...``; yields each AppTest."""
    for page in PAGES:
        at = open_app(model=model)
        at.switch_page(page).run()
        yield page, at
        if page == "pages/classroom.py":
            for tab in CLASSROOM_TABS:
                at.session_state[Sidebar.SOURCE] = "local"
                at.session_state[Sidebar.NAME] = model
                open_classroom_tab(at, tab)
                yield f"{page} / {tab}", at.run()


def test_no_page_or_tab_loads_a_model_from_outside_the_allowed_folders(tmp_path, monkeypatch):
    """A real model directory outside ATLAS_MODEL_ROOTS and a path that does not exist: on every
    page and every classroom tab neither loads, and both read the same."""
    allowed, outside = tmp_path / "allowed", tmp_path / "elsewhere"
    allowed.mkdir()
    shutil.copytree(
        BUNDLED_DIR, outside / "model", ignore=shutil.ignore_patterns("*.py", "__pycache__")
    )
    monkeypatch.setenv("ATLAS_MODEL_ROOTS", str(allowed))
    loads = []
    original = models_store.load
    monkeypatch.setattr(models_store, "load", lambda *a, **k: loads.append(a) or original(*a, **k))
    for model in (str(outside / "model"), str(outside / "missing")):
        for where, at in visits(model):
            assert not at.exception, where
            messages = [e.value for e in at.error]
            refused = any("only from the folders its operator allows" in m for m in messages)
            silent = where.startswith("pages/classroom.py") and not messages  # no model asked
            assert refused or silent, (where, messages)
            assert not any("model" in m and str(outside) in m for m in messages), where
    assert all(spec[0].name == "bundled" for spec in loads)  # only the default model loaded
