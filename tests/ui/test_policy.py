"""The one door: only the policy makes an AllowedSpec, the model store takes nothing else, and
every path a visitor can write gets the same answer whether or not it exists."""

import os

import pytest

from models.errors import ModelLoadError
from models.model.spec import ModelSpec
from ui.runtime.models import ModelStore
from ui.runtime.policy import OUTSIDE, AllowedSpec, admit
from ui.runtime.settings import Settings


def settings_for(*roots) -> Settings:
    return Settings(model_roots=tuple(r.resolve() for r in roots))


def test_the_model_store_loads_only_an_allowed_spec(tmp_path):
    store = ModelStore(max_bytes=1 << 30, cache=tmp_path)
    with pytest.raises(TypeError):
        store.get(ModelSpec("bundled"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        AllowedSpec(ModelSpec("bundled"))
    allowed = admit(ModelSpec("bundled"), Settings())
    assert store.get(allowed).facts.n_layers == 3


@pytest.mark.parametrize(
    "name",
    [
        "/etc",
        "/etc/nothing-here",
        "models/../../../../../etc",
        "models/../../../../../nope",
        "../../..",
        "~/no-such-model",
        "/proc/self/cwd",
        "x.gguf/../../etc",
    ],
)
def test_paths_outside_the_allowed_folders_all_get_one_message(tmp_path, name):
    with pytest.raises(ModelLoadError) as err:
        admit(ModelSpec(name), settings_for(tmp_path))
    assert str(err.value) == OUTSIDE


def test_a_directory_whose_files_link_outside_is_not_read(tmp_path):
    root, outside = tmp_path / "allowed", tmp_path / "secret"
    root.mkdir(), outside.mkdir()
    (outside / "model.safetensors").write_bytes(b"weights")
    model = root / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    os.symlink(outside / "model.safetensors", model / "model.safetensors")
    with pytest.raises(ModelLoadError, match="links to files outside"):
        admit(ModelSpec(str(model)), settings_for(root))


def test_a_fifo_named_gguf_is_never_opened(tmp_path):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    with pytest.raises(ModelLoadError, match="not a regular file"):
        admit(ModelSpec(str(fifo)), settings_for(tmp_path))
    (tmp_path / "dir.gguf").mkdir()
    with pytest.raises(ModelLoadError, match="not a regular file"):
        admit(ModelSpec(str(tmp_path / "dir.gguf")), settings_for(tmp_path))


def test_remote_code_is_dropped_unless_the_operator_allows_it():
    spec = ModelSpec("owner/model", trust_remote_code=True)
    assert not admit(spec, Settings()).spec.trust_remote_code
    assert admit(spec, Settings(allow_remote_code=True)).spec.trust_remote_code


def test_hub_names_must_look_like_one():
    with pytest.raises(ModelLoadError, match="not a Hugging Face model name"):
        admit(ModelSpec("owner/na me"), Settings())
    assert admit(ModelSpec(" gpt2 "), Settings()).name == "gpt2"


def test_whether_a_name_is_a_path_never_depends_on_the_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "owner").mkdir()
    (tmp_path / "owner" / "model").mkdir()
    assert ModelSpec("owner/model").kind == "hub"  # exists here, still read as a name
    assert ModelSpec("./owner/model").kind == "local"
