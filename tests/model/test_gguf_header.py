"""The GGUF header reader checks every declared size against the file before it reads or
allocates anything: a small file that lies about its sizes is refused at once."""

from __future__ import annotations

import struct
import time

import gguf
import numpy as np
import pytest

from models.errors import ModelLoadError
from models.model.gguf import check_conversion_fits, header
from models.model.gguf_header import HeaderError, read_header


def lying_file(path, count: int) -> None:
    """114 bytes declaring one metadata array of ``count`` 8-byte values."""
    key = b"general.architecture"
    body = (
        b"GGUF"
        + struct.pack("<IQQ", 3, 0, 2)
        + struct.pack("<Q", len(key))
        + key
        + struct.pack("<I", 8)
        + struct.pack("<Q", 5)
        + b"llama"
        + struct.pack("<Q", 4)
        + b"huge"
        + struct.pack("<IIQ", 9, 10, count)
    )
    path.write_bytes(body.ljust(114, b"\0"))


def test_a_declared_two_to_the_forty_array_is_refused_at_once(tmp_path):
    path = tmp_path / "liar.gguf"
    lying_file(path, 2**40)
    start = time.perf_counter()
    with pytest.raises(HeaderError, match="cannot fit"):
        read_header(path)
    assert time.perf_counter() - start < 1.0  # no allocation, no scan: a check of the size
    with pytest.raises(ModelLoadError, match="not a readable GGUF file"):
        header(path)


def test_a_real_file_reads_like_the_gguf_package_reads_it(tmp_path):
    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("llama.block_count", 2)
    writer.add_array("tokenizer.ggml.tokens", ["a", "bb", "ccc"])
    writer.add_tensor("w1", np.ones((3, 4), np.float32))
    writer.add_tensor("w2", np.ones((5,), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    found = read_header(path)
    reader = gguf.GGUFReader(str(path))
    assert found.architecture == "llama" and found.n_tensors == 2
    assert found.n_elements == sum(int(t.n_elements) for t in reader.tensors) == 17


def test_truncated_and_foreign_files_are_refused(tmp_path):
    path = tmp_path / "cut.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<I", 3))
    with pytest.raises(HeaderError):
        read_header(path)
    path.write_bytes(b"PK\x03\x04 a zip file, not a model")
    with pytest.raises(HeaderError, match="magic"):
        read_header(path)


def test_a_conversion_that_would_not_fit_is_refused_before_it_starts(tmp_path):
    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("w", np.ones((1000,), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    check_conversion_fits(path, free_memory=10**9, free_disk=10**9)
    with pytest.raises(ModelLoadError, match="of memory"):
        check_conversion_fits(path, free_memory=1000, free_disk=10**9)
    with pytest.raises(ModelLoadError, match="has only"):
        check_conversion_fits(path, free_memory=10**9, free_disk=1000)
