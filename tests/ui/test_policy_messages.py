"""What the policy and the loader say to a visitor names no server path: every message they
can produce for a local directory or a GGUF file inside an allowed folder, and for paths
outside, shows the model as the visitor knows it (inside its allowed folder), never resolved.
An over-long path part gets one message wherever it points, without touching the disk."""

from __future__ import annotations

import json
import os
import re
import shutil

import gguf
import numpy as np
import pytest

from models.errors import ModelLoadError, without_paths
from models.model.spec import BUNDLED_DIR, ModelSpec
from tests.app.test_security import planted_code
from ui.runtime import policy
from ui.runtime.models import ModelStore
from ui.runtime.policy import OUTSIDE, TOO_LONG, admit
from ui.runtime.settings import Settings

ABSOLUTE = re.compile(r"(?<![\w.:/-])/[^\s/]+/")


def bundled_copy(folder, **config) -> None:
    shutil.copytree(BUNDLED_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    if config:
        found = json.loads((folder / "config.json").read_text())
        found.update(config)
        (folder / "config.json").write_text(json.dumps(found))


def gguf_file(path, arch: str = "llama", sizes: dict[str, int] | None = None) -> None:
    writer = gguf.GGUFWriter(str(path), arch)
    for name, value in (sizes or {}).items():
        writer.add_uint32(f"{arch}.{name}", value)
    writer.add_tensor("token_embd.weight", np.ones((64,), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def catalogue(root) -> dict[str, str]:
    """Bad models inside ``root``, by name (the path as a visitor types it, relative to root)."""
    (root / "empty").mkdir()
    planted_code(root / "coded", root / "marker.txt")
    bundled_copy(root / "typed", n_layer="three", n_head=["four"])
    bundled_copy(root / "unknown", model_type="no-such-architecture")
    bundled_copy(root / "broken")
    (root / "broken" / "model.safetensors").write_bytes(b"\x00not safetensors")
    bundled_copy(root / "badjson")
    (root / "badjson" / "config.json").write_text("{ not json")
    (root / "fifo-dir").mkdir()
    os.mkfifo(root / "fifo-dir" / "weights.bin")
    (root / "dir.gguf").mkdir()
    os.mkfifo(root / "fifo.gguf")
    (root / "text.gguf").write_text("just some text")
    gguf_file(root / "foo.gguf", arch="foo")
    gguf_file(root / "vague.gguf")
    gguf_file(
        root / "claims.gguf",
        sizes={"block_count": 24, "embedding_length": 1024, "feed_forward_length": 4096},
    )
    names = [
        "nope",
        "empty",
        "coded",
        "typed",
        "unknown",
        "broken",
        "badjson",
        "fifo-dir",
        "absent.gguf",
        "dir.gguf",
        "fifo.gguf",
        "text.gguf",
        "foo.gguf",
        "vague.gguf",
        "claims.gguf",
    ]
    return {name: str(root / name) for name in names}


def message(typed: str, settings: Settings, store: ModelStore) -> str:
    """What a visitor reads for ``typed``: the policy's refusal, or the loader's."""
    try:
        allowed = admit(ModelSpec(typed), settings)
        store.get(allowed)
    except ModelLoadError as err:
        return str(err)
    raise AssertionError(f"{typed} loaded")


def test_no_message_of_the_policy_or_the_loader_names_a_server_path(tmp_path, monkeypatch):
    root = tmp_path / "srv" / "models"
    root.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    settings = Settings(model_roots=(root.resolve(),))
    store = ModelStore(max_bytes=1 << 30, cache=tmp_path / "cache")
    server_paths = [str(tmp_path), str(root), os.getcwd(), str(tmp_path / "cache")]
    said = {}
    for name, path in catalogue(root).items():
        for typed in (path, f"srv/models/{name}", f"./srv/../srv/models/{name}"):
            text = message(typed, settings, store)
            assert not any(p in text for p in server_paths), (typed, text)
            assert not ABSOLUTE.search(text), (typed, text)
            said.setdefault(name, text)
    assert not (root / "marker.txt").exists()
    assert said["nope"] == "No directory named nope."
    assert said["empty"] == "empty is not a Hugging Face model directory: it has no config.json."
    assert said["coded"].startswith("coded needs its own modelling code")
    assert said["fifo-dir"].startswith("fifo-dir holds weights.bin, which is not a regular file")
    assert said["absent.gguf"] == "No GGUF file named absent.gguf in the allowed folders."
    assert "claims.gguf describes a model of at least" in said["claims.gguf"]
    for name in ("typed", "unknown", "broken", "badjson"):
        assert said[name].startswith((f"{name}: ", f"Could not load {name}")), said[name]
    for outside in ("/etc", str(tmp_path / "elsewhere"), "../../../../etc"):
        assert message(outside, settings, store) == OUTSIDE


def test_a_loaded_local_model_is_named_inside_its_folder_and_linked_as_typed(tmp_path):
    root = tmp_path / "models"
    bundled_copy(root / "gpt" / "small")
    settings = Settings(model_roots=(root.resolve(),))
    typed = f"{root}/gpt/../gpt/small/"
    allowed = admit(ModelSpec(typed), settings)
    assert allowed.spec.name == str((root / "gpt" / "small").resolve())
    assert allowed.label == "gpt/small" and allowed.name == typed.strip()
    model = ModelStore(max_bytes=1 << 30, cache=tmp_path / "cache").get(allowed)
    assert model.facts.name == "gpt/small"
    assert admit(ModelSpec(allowed.name), settings) == allowed  # the link opens the same model


@pytest.mark.parametrize("inside", [True, False])
@pytest.mark.parametrize("part", [256, 5000])
def test_an_over_long_path_gets_one_message_inside_or_outside_the_folders(tmp_path, inside, part):
    """Inside an allowed folder, checking such a path used to raise ENAMETOOLONG (the page's
    exception box) while outside it got the usual refusal: the difference told a visitor which
    folders are allowed. Now both read the same, and nothing looks at the disk."""
    root = tmp_path / "models"
    root.mkdir()
    settings = Settings(model_roots=(root.resolve(),))
    base = root if inside else tmp_path / "elsewhere"
    long = "a" * part
    for typed in (f"{base}/{long}", f"{base}/{long}/x", f"{base}/{long}.gguf"):
        with pytest.raises(ModelLoadError) as err:
            admit(ModelSpec(typed), settings)
        assert str(err.value) == TOO_LONG


def test_a_path_that_cannot_be_checked_is_a_message_not_an_exception(tmp_path, monkeypatch):
    """Any other error from the file system while checking a directory is not raised."""
    root = tmp_path / "models"
    (root / "m").mkdir(parents=True)
    settings = Settings(model_roots=(root.resolve(),))

    def refuse(*_a, **_k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(policy.Path, "is_dir", refuse)
    assert admit(ModelSpec(str(root / "m")), settings).label == "m"


def test_library_messages_lose_their_paths():
    named = {"/srv/app/models/m": "m"}
    assert without_paths("Can't load '/srv/app/models/m/config.json'.", named) == (
        "Can't load 'm/config.json'."
    )
    assert without_paths("at /root/.cache/huggingface/hub/x/model.safetensors: bad") == (
        "at …/model.safetensors: bad"
    )
    assert without_paths("ratio 1/2, http://example.org/a/b, a/b/c") == (
        "ratio 1/2, http://example.org/a/b, a/b/c"
    )
