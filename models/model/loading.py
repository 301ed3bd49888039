"""Load any supported model through ``TransformerBridge.boot_transformers``.

One entry point, :func:`load`, for the bundled model, the shipped MiniLM encoder, a local
Hugging Face directory or a hub name. Every failure becomes a :class:`ModelLoadError` whose
message is meant for the page, not for a traceback.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from models.errors import ModelLoadError, without_paths
from models.model.facts import ModelFacts, facts_from_bridge
from models.model.gguf import DEFAULT_CACHE, check_conversion_fits, convert, is_converted
from models.model.handle import ModelHandle
from models.model.load_lock import LOAD_LOCK
from models.model.spec import ModelSpec
from models.progress import Progress, part, quiet

GIB = 1024**3
__all__ = ["LoadedModel", "ModelLoadError", "bridge_of", "load"]


@dataclass
class LoadedModel:
    """A booted bridge plus what the app needs beside it.

    ``lock`` serialises forward passes: the bridge is shared by every browser session, and
    hooks added by one run must never be seen by another. ``memo`` keeps facts probed once
    (see :func:`models.model.forward.qk_source`). ``source`` is the directory or hub name the
    weights were read from (for code that reads the checkpoint again, such as an export).
    """

    spec: ModelSpec
    bridge: Any
    facts: ModelFacts
    source: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def tokenizer(self) -> Any:
        return self.bridge.tokenizer

    @property
    def nbytes(self) -> int:
        """Memory the weights take (what a memory budget counts)."""
        return self.facts.n_params * torch.tensor([], dtype=self.spec.torch_dtype).element_size()


def bridge_of(model: ModelHandle) -> Any:
    """The TransformerLens bridge behind ``model``: the one way to it, for :mod:`models.model`.

    Raises:
        TypeError: ``model`` was not made by :func:`load`.
    """
    if not isinstance(model, LoadedModel):
        raise TypeError(f"Not a loaded model: {type(model).__name__}")
    return model.bridge


def available_bytes(device: str) -> int:
    """Memory free for new weights on ``device`` (CUDA: free device memory; CPU: MemAvailable)."""
    if device == "cuda":
        free, _total = torch.cuda.mem_get_info()
        return int(free)
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def count_parameters(config: Any) -> int | None:
    """Parameter count of the architecture in ``config``, built on the meta device (no memory)."""
    import transformers

    arch = (getattr(config, "architectures", None) or [None])[0]
    model_cls = getattr(transformers, arch, None) if arch else None
    try:
        with torch.device("meta"):
            if model_cls is not None:
                model = model_cls(config)
            else:
                model = transformers.AutoModel.from_config(config)
    except Exception:  # noqa: BLE001 - an estimate only; the real load reports real errors
        return None
    return sum(int(p.numel()) for p in model.parameters())


def placement_bytes(spec: ModelSpec) -> tuple[int, str]:
    """Memory free where ``spec`` would put its weights, and where that is in words.

    One device: that device. A device map: the CPU's free memory plus every GPU's (accelerate
    spreads layers over all of them and never beyond).
    """
    if spec.device_map is None:
        return available_bytes(spec.device), spec.device
    free = available_bytes("cpu")
    if torch.cuda.is_available():
        free += sum(int(torch.cuda.mem_get_info(i)[0]) for i in range(torch.cuda.device_count()))
        return free, "the CPU and GPUs together"
    return free, "the CPU"


def check_fits(n_params: int | None, spec: ModelSpec, free: int | None = None) -> None:
    """Refuse, with the numbers, a model whose weights alone exceed the free memory, for every
    placement (one device or a device map)."""
    if n_params is None:
        return
    need = n_params * torch.tensor([], dtype=spec.torch_dtype).element_size()
    where: str = spec.device if spec.device_map is None else "this server"
    if free is None:
        free, where = placement_bytes(spec)
    if need > free:
        raise ModelLoadError(
            f"{spec.label} has {n_params / 1e6:,.0f} M parameters: about {need / GIB:.2f} GiB "
            f"in {spec.dtype}, but only {free / GIB:.2f} GiB is free on {where}. "
            "Pick a smaller model or a smaller dtype."
        )


def _check_source(spec: ModelSpec, source: str) -> None:
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("No CUDA GPU is available on this server; choose the cpu device.")
    gguf_file = spec.gguf_file
    if gguf_file is not None and not gguf_file.is_file():
        raise ModelLoadError(f"No GGUF file named {gguf_file.name}.")
    if spec.kind in ("local", "bundled", "minilm"):
        path = Path(source)
        if not path.is_dir():
            raise ModelLoadError(f"No directory named {spec.label}.")
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"{spec.label} is not a Hugging Face model directory: it has no config.json."
            )


def said(err: BaseException, spec: ModelSpec, source: str) -> str:
    """The first line of a library's error about ``spec``, at most 200 characters, naming the
    model by its label and no server path (the source directory, the caches)."""
    text = str(err).splitlines()[0] if str(err).strip() else type(err).__name__
    return without_paths(text, {source: spec.label})[:200]


HUB_HOST = ("huggingface.co", 443)
PROBE_S = 3.0


def hub_cached(name: str) -> bool:
    """Whether the local Hugging Face cache holds ``name``'s configuration."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(name, "config.json")
    except Exception:  # noqa: BLE001 - an odd name is simply not cached
        return False
    return isinstance(found, str)


def hub_reachable(timeout: float = PROBE_S) -> bool:
    """Whether the Hugging Face hub answers at all within ``timeout`` seconds."""
    import socket

    try:
        with socket.create_connection(HUB_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def check_hub(spec: ModelSpec) -> None:
    """Say at once when a hub model can only come from a hub this server cannot use.

    Raises:
        ModelLoadError: not cached, and the server is offline by setting or by fact.
    """
    if spec.kind != "hub" or hub_cached(spec.name):
        return
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        raise ModelLoadError(
            f"Could not find '{spec.name}': this server runs offline (HF_HUB_OFFLINE) and its "
            "Hugging Face cache has no copy of it. Choose a bundled model, or ask the operator "
            "to download it first."
        )
    if not hub_reachable():
        raise ModelLoadError(
            f"Could not find '{spec.name}': it is not in this server's Hugging Face cache, and "
            "the server cannot reach the Hugging Face hub right now (no network)."
        )


def _read_config(spec: ModelSpec, source: str) -> Any:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(source, trust_remote_code=spec.trust_remote_code)
    except ValueError as err:
        if "trust_remote_code" in str(err):
            raise ModelLoadError(
                f"{spec.label} needs its own modelling code from its repository. Turn on "
                "'Trust remote code' only if you trust that repository."
            ) from err
        raise ModelLoadError(
            f"{spec.label}: unreadable configuration ({said(err, spec, source)})."
        ) from err
    except (OSError, json.JSONDecodeError) as err:
        if spec.kind == "hub":
            raise ModelLoadError(
                f"Could not find '{spec.name}': it is not a local directory, not in the local "
                "Hugging Face cache, and the hub did not provide it (unknown name, gated "
                "model, or no network)."
            ) from err
        raise ModelLoadError(
            f"{spec.label}: unreadable configuration ({said(err, spec, source)})."
        ) from err


NO_ADAPTER = "Could not determine supported architecture"


def no_adapter_message(spec: ModelSpec, source: str) -> str:
    """One line for a model TransformerLens has no adapter for (see :func:`no_adapter`)."""
    from models.model.variants.differential import no_adapter

    try:
        return no_adapter(_read_config(spec, source), spec.label)
    except ModelLoadError:
        return no_adapter(None, spec.label)


def _boot(spec: ModelSpec, source: str) -> Any:
    from transformer_lens.model_bridge import TransformerBridge

    kwargs: dict[str, Any] = {
        "dtype": spec.torch_dtype,
        "trust_remote_code": spec.trust_remote_code,
    }
    if spec.device_map is not None:
        kwargs["device_map"] = spec.device_map
    else:
        kwargs["device"] = spec.device
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        bridge = TransformerBridge.boot_transformers(source, **kwargs)
    except ModelLoadError:
        raise
    except Exception as err:
        text = said(err, spec, source)
        if text.startswith(NO_ADAPTER):
            raise ModelLoadError(no_adapter_message(spec, source)) from err
        if "not supported" in text.lower() or "unsupported" in text.lower():
            raise ModelLoadError(f"TransformerLens cannot load {spec.label}: {text}") from err
        raise ModelLoadError(f"Could not load {spec.label}: {text}") from err
    bridge.eval()
    return bridge


def preflight(spec: ModelSpec, source: str) -> int | None:
    """Check the source and read its configuration; return the parameter count if known.

    Raises:
        ModelLoadError: no such directory, unreadable config, unknown hub name while offline.
    """
    _check_source(spec, source)
    check_hub(spec)
    return count_parameters(_read_config(spec, source))


def boot(spec: ModelSpec, source: str) -> LoadedModel:
    """Load the weights through TransformerLens and describe the model (no checks first).

    Raises:
        ModelLoadError: a layer is neither attention nor a linear-attention layer (a
            state-space mixer), which no view could read.
    """
    from models.model.variants.mixers import refusal

    bridge = _boot(spec, source)
    refused = refusal(bridge, spec.label)
    if refused is not None:
        raise ModelLoadError(refused)
    return LoadedModel(
        spec=spec, bridge=bridge, facts=facts_from_bridge(bridge, spec.label), source=source
    )


def free_disk(folder: Path) -> int:
    """Bytes free on the file system that holds ``folder`` (or its nearest existing parent)."""
    for place in (folder, *folder.parents):
        try:
            return shutil.disk_usage(place).free
        except OSError:
            continue
    return 0


def load(spec: ModelSpec, progress: Progress = quiet, cache: Path = DEFAULT_CACHE) -> LoadedModel:
    """Check, then boot ``spec`` through TransformerLens, one load at a time in this process.

    Reading a configuration, counting parameters on the meta device and booting all patch
    process-wide state in torch and transformers (default device, weight initialisation,
    ``tie_weights``); two loads interleaved in two threads corrupt each other and every later
    load. :data:`LOAD_LOCK` runs them one after the other.

    Args:
        spec: what to load.
        progress: called with (fraction done, what is happening) for a progress bar.
        cache: the app's cache folder (GGUF files are converted into it once).

    Returns:
        The loaded model with its facts and a forward-pass lock.

    Raises:
        ModelLoadError: for any failure, with a message for the user (never another exception).
    """
    with LOAD_LOCK:
        try:
            return _load(spec, progress, cache)
        except ModelLoadError:
            raise
        except Exception as err:
            raise ModelLoadError(
                f"Could not load {spec.label}: its files could not be read ({type(err).__name__})."
            ) from err


def _load(spec: ModelSpec, progress: Progress, cache: Path) -> LoadedModel:
    gguf_file = spec.gguf_file
    source = spec.source(cache)
    if gguf_file is not None and not is_converted(gguf_file, cache):
        _check_source(spec, source)
        check_conversion_fits(gguf_file, available_bytes("cpu"), free_disk(cache))
        convert(gguf_file, part(progress, 0.0, 0.8), cache)
    progress(0.05, f"Reading the configuration of {spec.label}")
    n_params = preflight(spec, source)
    progress(0.2, "Checking free memory")
    check_fits(n_params, spec)
    progress(0.35, f"Loading {spec.label} weights on {spec.device}")
    model = boot(spec, source)
    progress(1.0, "Ready")
    return model
