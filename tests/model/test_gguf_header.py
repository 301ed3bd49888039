"""The GGUF header reader checks every declared size against the file before it reads or
allocates anything: a small file that lies about its sizes is refused at once."""

from __future__ import annotations

import struct
import time

import gguf
import numpy as np
import pytest

from models.errors import ModelLoadError
from models.model.gguf import check_conversion_fits, convert, header, smollm2_gguf
from models.model.gguf_header import HeaderError, described_weights, read_header


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
    for name, value in (("block_count", 1), ("embedding_length", 10), ("feed_forward_length", 10)):
        writer.add_uint32(f"llama.{name}", value)
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


def claiming_file(path, sizes: dict[str, int], n_tokens: int, tensor: int = 1000) -> None:
    """A small Llama GGUF whose metadata states ``sizes`` and a token list of ``n_tokens``,
    with one tensor of ``tensor`` numbers."""
    writer = gguf.GGUFWriter(str(path), "llama")
    for name, value in sizes.items():
        writer.add_uint32(f"llama.{name}", value)
    writer.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(n_tokens)])
    writer.add_tensor("token_embd.weight", np.ones((tensor,), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# A Llama of 24 blocks, 1,024 wide, feed-forward 4,096, 32,000 tokens: about 405 M weights with
# its attention; the metadata's lower bound is 32,000 x 1,024 + 24 x 2 x 1,024 x 4,096
# (234,094,592).
CLAIMED = {"block_count": 24, "embedding_length": 1024, "feed_forward_length": 4096}
CLAIMED_LOWER = 32_000 * 1024 + 24 * 2 * 1024 * 4096


def test_a_small_file_claiming_a_big_model_is_refused_before_conversion(tmp_path):
    path = tmp_path / "claims-405m.gguf"
    claiming_file(path, {**CLAIMED, "vocab_size": 32_000}, n_tokens=8)
    assert path.stat().st_size < 12_000
    found = read_header(path)
    assert found.size("block_count") == 24 and found.n_tokens == 8
    assert described_weights(found) == CLAIMED_LOWER
    with pytest.raises(ModelLoadError, match=r"at least 234\.1 M weights.*only 1,000 weights"):
        header(path)
    cache = tmp_path / "cache"
    with pytest.raises(ModelLoadError, match="not converted"):
        convert(path, cache=cache)
    assert not cache.exists()


def test_the_vocabulary_counts_from_the_token_list_when_not_stated(tmp_path):
    path = tmp_path / "tokens.gguf"
    claiming_file(path, {"block_count": 1, "embedding_length": 8, "feed_forward_length": 8}, 500)
    assert described_weights(read_header(path)) == 500 * 8 + 2 * 8 * 8
    with pytest.raises(ModelLoadError, match=r"at least 4,128 weights.*only 1,000 weights"):
        header(path)


@pytest.mark.parametrize("missing", sorted(CLAIMED))
def test_a_file_that_does_not_state_its_size_is_refused(tmp_path, missing):
    """transformers would fill an unstated size with its own default (Llama: 4,096 wide,
    32 blocks), so each size it reads must be in the file."""
    path = tmp_path / "vague.gguf"
    claiming_file(path, {k: 1 for k in CLAIMED if k != missing}, n_tokens=0)
    with pytest.raises(ModelLoadError, match=f"{missing} missing"):
        header(path)


def test_a_file_whose_tensors_hold_what_its_metadata_describes_passes(tmp_path):
    path = tmp_path / "honest.gguf"
    claiming_file(path, {"block_count": 2, "embedding_length": 8, "feed_forward_length": 16}, 10)
    assert header(path).n_elements == 1000 >= 10 * 8 + 2 * 2 * 8 * 16


def test_smollm2_describes_no_more_than_its_tensors_hold():
    found = header(smollm2_gguf())
    assert (found.size("block_count"), found.size("embedding_length")) == (30, 576)
    assert described_weights(found) == 49_152 * 576 + 30 * 2 * 576 * 1536
    assert described_weights(found) <= found.n_elements == 134_515_008
