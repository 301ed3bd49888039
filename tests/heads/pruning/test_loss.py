"""Which loss a model gets, and the masked-token loss against Hugging Face's own."""

import shutil

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from models.heads.finding.corpus import sample
from models.heads.pruning.ablation import ablated_loss
from models.heads.pruning.loss import (
    IGNORE,
    LossUnavailable,
    loss_kind,
    mlm_head_in_checkpoint,
    reference_task,
)
from models.model.loading import load
from models.model.spec import ModelSpec, minilm_dir

SAMPLE_TEXT = sample().texts[0]
TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


@pytest.fixture(scope="module")
def tiny_mlm_dir(tmp_path_factory):
    """A small random BERT whose checkpoint does include masked-LM head weights."""
    folder = tmp_path_factory.mktemp("tiny_mlm")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertForMaskedLM(config).save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (minilm_dir() / name).is_file():
            shutil.copy(minilm_dir() / name, folder / name)
    return folder


def test_minilm_has_no_masked_token_loss(minilm):
    assert mlm_head_in_checkpoint(minilm.spec) is False
    with pytest.raises(LossUnavailable, match="Not available for all-MiniLM-L6-v2"):
        loss_kind(minilm)
    with pytest.raises(LossUnavailable):
        reference_task(minilm, SAMPLE_TEXT)


def test_masked_token_loss_matches_hugging_face(tiny_mlm_dir):
    model = load(ModelSpec(str(tiny_mlm_dir)))
    assert mlm_head_in_checkpoint(model.spec) is True
    assert loss_kind(model) == "masked_token"
    task = reference_task(model, SAMPLE_TEXT)
    masked = task.labels[0] != IGNORE
    mask_id = model.tokenizer.mask_token_id
    assert (task.ids[0, masked] == mask_id).all() and (task.ids[0, ~masked] != mask_id).all()
    ordinary = (task.ids[0] != model.tokenizer.cls_token_id) & (
        task.ids[0] != model.tokenizer.sep_token_id
    )
    assert task.n_targets == round(0.15 * int(ordinary.sum()))
    hf = BertForMaskedLM.from_pretrained(tiny_mlm_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        expected = hf(
            input_ids=task.ids, attention_mask=torch.ones_like(task.ids), labels=task.labels
        ).loss.item()
    assert ablated_loss(model, task) == pytest.approx(expected, abs=1e-5)
