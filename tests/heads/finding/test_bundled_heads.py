"""The bundled model has the heads the app promises, measured here independently of the app.

Induction: [BOS, r_1..r_L, r_1..r_L] with random ordinary tokens; mean of A[q, q-L+1] over the
L second-half queries only. Previous-token: mean over queries i >= 1 of A[i, i-1] on text.
Both computed from Hugging Face eager attention, not from the app's code.
"""

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from models.model.spec import BUNDLED_DIR

SPAN, BATCH = 50, 8
TEXT = '''def read_config(path):
    """Read a JSON configuration file and return it as a dict."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ValueError("expected an object at the top level")
    return data
'''


def hf_attentions(ids):
    model = AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, attn_implementation="eager").eval()
    with torch.no_grad():
        return torch.stack(model(ids, output_attentions=True).attentions)  # layer batch head q k


def test_bundled_has_an_induction_head():
    tok = AutoTokenizer.from_pretrained(BUNDLED_DIR)
    special = set(tok.all_special_ids)
    ordinary = torch.tensor([i for i in range(len(tok)) if i not in special])
    gen = torch.Generator().manual_seed(7)
    rand = ordinary[torch.randint(len(ordinary), (BATCH, SPAN), generator=gen)]
    ids = torch.cat([torch.full((BATCH, 1), tok.bos_token_id), rand, rand], dim=1)
    att = hf_attentions(ids)
    scores = torch.zeros(att.shape[0], att.shape[2])
    for q in range(SPAN + 1, 2 * SPAN + 1):  # second-half queries only
        scores += att[:, :, :, q, q - SPAN + 1].mean(dim=1)
    scores /= SPAN
    assert scores.max().item() >= 0.5, scores


def test_bundled_has_a_previous_token_head():
    tok = AutoTokenizer.from_pretrained(BUNDLED_DIR)
    ids = torch.tensor([[tok.bos_token_id] + tok(TEXT)["input_ids"]])
    att = hf_attentions(ids)[:, 0]  # layer head q k
    n = ids.shape[1]
    rows = torch.arange(1, n)
    scores = att[:, :, rows, rows - 1].mean(dim=-1)
    assert scores.max().item() >= 0.5, scores
