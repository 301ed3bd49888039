"""The sidebar's dtype note follows what the hardware reports, with ratios from the rates."""

from typing import get_args

import pytest

from models.model.hardware import LowPrecision
from models.model.spec import ModelSpec, SourceKind
from ui.state.sidebar import FAST_RATIO, SOURCES, dtype_note, half_type, source_of

NATIVE = LowPrecision("bfloat16", "cpu", True, "AVX512-BF16")
EMULATED = LowPrecision("bfloat16", "cpu", False, "no bfloat16 instructions")


def test_native_is_offered_as_the_fast_choice_with_the_measured_ratio():
    note = dtype_note("float32", NATIVE, {"float32": 190.0, "bfloat16": 790.0})
    assert note == (
        "bfloat16: native on this CPU (AVX512-BF16), about "
        f"{790.0 / 190.0:.1f}× float32's matmul rate: the fast choice."
    )
    assert "4.2×" in note


def test_chosen_native_type_says_patterns_stay_float32():
    note = dtype_note("bfloat16", NATIVE, {"float32": 100.0, "bfloat16": 300.0})
    assert "about 3.0×" in note and note.endswith("Patterns are still computed in float32.")


def test_native_flags_without_a_faster_rate_are_not_called_fast():
    slow = {"float32": 100.0, "bfloat16": 100.0 * FAST_RATIO * 0.9}
    note = dtype_note("float32", NATIVE, slow)
    assert "fast choice" not in note and note.endswith("no faster than float32 here.")


def test_native_without_measured_rates_has_no_ratio():
    assert dtype_note("float32", NATIVE, None) == (
        "bfloat16: native on this CPU (AVX512-BF16): the fast choice."
    )


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_emulated_type_is_said_to_be_slower(dtype):
    assert dtype_note(dtype, EMULATED, None) == (
        "bfloat16 is emulated on this CPU: slower than float32 here."
    )


def test_float16_and_gpu_words():
    gpu = LowPrecision("float16", "cuda", True, "NVIDIA H200 (compute 9.0)")
    assert half_type("float16") == "float16" and half_type("float32") == "bfloat16"
    assert dtype_note("float16", gpu, {"float32": 50.0, "float16": 500.0}).startswith(
        "float16: native on this GPU (NVIDIA H200 (compute 9.0)), about 10.0×"
    )


def test_named_sources_open_as_themselves():
    assert source_of("smollm2") == ("smollm2", "")
    assert source_of("gpt2") == ("hub", "gpt2")


def test_the_sidebar_offers_every_kind_of_model_source_once():
    assert sorted(SOURCES) == sorted(get_args(SourceKind)) and len(set(SOURCES)) == len(SOURCES)
    typed = {"hub": "gpt2", "local": "./my-model", "gguf": "tiny.gguf"}
    for source, name in typed.items():
        assert source_of(name) == (source, name) and ModelSpec(name).kind == source
