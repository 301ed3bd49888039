"""Train the bundled default model: a small GPT-2 that grows induction heads.

Corpus: the ``.py`` sources of the running Python's standard library (present on every machine
with Python), read in sorted path order, test suites excluded. A byte-level BPE tokenizer is
trained on the same text. Batches mix plain text windows with sequences that repeat one span over
and over (half random-token spans, half text spans): in-context copying is what makes induction
heads form within a few thousand CPU steps.

Run from the repository root::

    python -m models.bundled.train --out models/bundled

Everything is seeded; the same Python version gives the same corpus and the same weights.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

from models.bundled.corpus import BOS, read_corpus, train_tokenizer

class Batches:
    """Seeded batches: plain windows of the corpus, or BOS + one span repeated to the end."""

    def __init__(self, ids: torch.Tensor, vocab: int, seq: int, batch: int, repeat_frac: float,
                 seed: int, twice_frac: float = 0.0):
        self.ids, self.vocab, self.seq, self.batch = ids, vocab, seq, batch
        self.twice_frac = twice_frac
        self.repeat_frac = repeat_frac
        self.gen = torch.Generator().manual_seed(seed)

    def _randint(self, low: int, high: int) -> int:
        return int(torch.randint(low, high, (1,), generator=self.gen))

    def _text(self, n: int) -> torch.Tensor:
        start = self._randint(0, len(self.ids) - n)
        return self.ids[start : start + n]

    def _repeated(self, n: int) -> torch.Tensor:
        """One span over and over; or, a ``twice_frac`` share of the time, a span of random
        tokens twice in a row followed by text (the shape of the induction probe)."""
        if self.twice_frac and torch.rand(1, generator=self.gen).item() < self.twice_frac:
            span = torch.randint(1, self.vocab, (self._randint(8, n // 2),), generator=self.gen)
            return torch.cat([span, span, self._text(n - 2 * len(span))])
        span_len = self._randint(6, 41)
        if self._randint(0, 2) == 0:
            span = torch.randint(1, self.vocab, (span_len,), generator=self.gen)
        else:
            span = self._text(span_len)
        reps = math.ceil(n / span_len)
        return span.repeat(reps)[:n]

    def next(self) -> torch.Tensor:
        rows = []
        for _ in range(self.batch):
            body_len = self.seq - 1
            is_repeat = torch.rand(1, generator=self.gen).item() < self.repeat_frac
            body = self._repeated(body_len) if is_repeat else self._text(body_len)
            rows.append(torch.cat([torch.zeros(1, dtype=torch.long), body]))
        return torch.stack(rows)


def lr_factor(step: int, total: int, warmup: int = 200, cooldown: float = 0.15) -> float:
    """Linear warm-up, a constant rate (the induction phase change wants it), then a linear
    cool-down to 10 % over the last ``cooldown`` share of the steps."""
    if step < warmup:
        return (step + 1) / warmup
    start = total * (1 - cooldown)
    return 1.0 if step < start else max(0.1, 1.0 - 0.9 * (step - start) / (total - start))


@torch.no_grad()
def head_scores(model: GPT2LMHeadModel, vocab: int, text_ids: torch.Tensor, span: int = 50,
                batch: int = 8, seed: int = 1234) -> dict[str, list[list[float]]]:
    """Induction (second-half queries of [BOS, r, r]) and previous-token scores per head."""
    gen = torch.Generator().manual_seed(seed)
    rand = torch.randint(1, vocab, (batch, span), generator=gen)
    seq = torch.cat([torch.zeros(batch, 1, dtype=torch.long), rand, rand], dim=1)
    att = torch.stack(model(seq, output_attentions=True).attentions)  # layer batch head q k
    q = torch.arange(span + 1, 2 * span + 1)
    induction = att[:, :, :, q, q - span + 1].mean(dim=(1, 3))
    n = min(128, model.config.n_positions - 1)
    starts = torch.randint(0, len(text_ids) - n, (batch,), generator=gen)
    text = torch.stack([torch.cat([torch.zeros(1, dtype=torch.long), text_ids[s : s + n]])
                        for s in starts.tolist()])
    att = torch.stack(model(text, output_attentions=True).attentions)
    i = torch.arange(1, n + 1)
    previous = att[:, :, :, i, i - 1].mean(dim=(1, 3))
    return {"induction": induction.tolist(), "previous_token": previous.tolist()}


REPRODUCE = """python -m models.bundled.train --out /tmp/stage1
python -m models.bundled.train --init /tmp/stage1 --out models/bundled \\
    --twice-frac 0.5 --repeat-frac 0.7 --lr 3e-3 --steps 3000"""


def score_table(rows: list[list[float]]) -> str:
    head = "| layer | " + " | ".join(f"head {h}" for h in range(len(rows[0]))) + " |"
    rule = "|---" * (len(rows[0]) + 1) + "|"
    body = [f"| {layer} | " + " | ".join(f"{v:.3f}" for v in row) + " |"
            for layer, row in enumerate(rows)]
    return "\n".join([head, rule, *body])


def stage_line(number: int, log: dict) -> str:
    args, last = log["args"], log["history"][-1]
    start = "from scratch" if args.get("init") in (None, "None") else "from stage 1"
    return (f"{number}. {start}: {args['steps']} steps, AdamW lr {args['lr']}, batch "
            f"{args['batch']} x {args['ctx']} tokens, {float(args['repeat_frac']):.0%} repeated "
            f"sequences ({float(args.get('twice_frac', 0)):.0%} of them a random span twice), "
            f"{log['seconds'] / 60:.0f} min on a 2-core CPU; then train loss "
            f"{last['train_loss']:.2f}, held-out loss {last['val_loss']:.2f}, best induction "
            f"{last['best_induction']:.2f}, best previous-token {last['best_previous_token']:.2f}.")


def write_card(out: Path) -> None:
    """Write the model card (README.md) from the training log saved beside the weights."""
    stages = json.loads((out / "training_log.json").read_text())["stages"]
    final, args = stages[-1], stages[-1]["args"]
    steps = "\n".join(stage_line(i + 1, log) for i, log in enumerate(stages))
    card = f"""# Bundled model: a small GPT-2 that copies in context

The default model of Attention Atlas. It loads offline in about a second and has real induction
and previous-token heads to find.

- Architecture: GPT-2, {args["layers"]} layers x {args["heads"]} heads, d_model {args["d_model"]},
  context {args["ctx"]} tokens, tied embeddings, no dropout ({final["n_params"]:,} parameters).
- Tokenizer: byte-level BPE with {args["vocab"]} tokens, trained on the same corpus;
  `<|endoftext|>` (id 0) is BOS, EOS and UNK, and the app prepends it to every prompt.
- Corpus: the `.py` sources of the Python standard library that ran the script (test packages
  left out), sorted by path, first {final["corpus_chars"]:,} characters
  ({final["corpus_tokens"]:,} tokens); the last 2 % is held out.
- Batches mix plain text windows with sequences that repeat one span (6-40 tokens, half random
  tokens, half corpus text) to the end of the context, and sequences holding a random span twice
  followed by text. Learning rate: warm-up, constant, then a linear cool-down over the last 15 %.
  Seed {args["seed"]}.

## Training

{steps}

Reproduce:

```
{REPRODUCE}
```

## Measured head scores (final weights)

Induction: mean of A[q, q-L+1] over the second-half queries of [BOS, r_1..r_50, r_1..r_50]
(8 sequences of random ordinary tokens).

{score_table(final["final_scores"]["induction"])}

Previous-token: mean of A[i, i-1] over queries i >= 1 on held-out text (8 windows of 128 tokens).

{score_table(final["final_scores"]["previous_token"])}
"""
    (out / "README.md").write_text(card)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(__file__).parent)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--ctx", type=int, default=128)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=3500)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--repeat-frac", type=float, default=0.6)
    p.add_argument("--twice-frac", type=float, default=0.0,
                   help="share of repeated sequences that hold a random span exactly twice")
    p.add_argument("--max-chars", type=int, default=12_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--card-only", action="store_true", help="rewrite README.md from the log")
    p.add_argument("--init", type=Path, help="continue training the checkpoint in this directory")
    args = p.parse_args()
    if args.card_only:
        write_card(args.out)
        return

    torch.manual_seed(args.seed)
    text = read_corpus(args.max_chars)
    if args.init:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(args.init)
        tokenizer.model_max_length = 10**6
    else:
        tokenizer = train_tokenizer(text, args.vocab)
    ids = torch.tensor(tokenizer(text)["input_ids"], dtype=torch.long)
    n_val = len(ids) // 50
    train_ids, val_ids = ids[:-n_val], ids[-n_val:]
    print(f"corpus: {len(text):,} chars, {len(ids):,} tokens", flush=True)

    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=args.ctx, n_embd=args.d_model,
        n_layer=args.layers, n_head=args.heads, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, tie_word_embeddings=True,
    )
    model = GPT2LMHeadModel.from_pretrained(args.init) if args.init else GPT2LMHeadModel(config)
    model.config._attn_implementation = "eager"
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, args.steps))
    batches = Batches(train_ids, len(tokenizer), args.ctx, args.batch, args.repeat_frac, args.seed,
                      args.twice_frac)
    history = []
    t0 = time.time()
    for step in range(1, args.steps + 1):
        x = batches.next()
        logits = model(x).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % args.eval_every == 0 or step == args.steps:
            model.eval()
            scores = head_scores(model, len(tokenizer), val_ids)
            with torch.no_grad():
                vx = torch.cat([torch.zeros(1, dtype=torch.long), val_ids[: args.ctx - 1]])[None]
                vl = model(vx, labels=vx).loss.item()
            model.train()
            best_ind = max(max(r) for r in scores["induction"])
            best_prev = max(max(r) for r in scores["previous_token"])
            history.append({"step": step, "train_loss": loss.item(), "val_loss": vl,
                            "best_induction": best_ind, "best_previous_token": best_prev})
            print(f"step {step} loss {loss.item():.3f} val {vl:.3f} induction {best_ind:.3f} "
                  f"prev {best_prev:.3f} ({time.time() - t0:.0f}s)", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer.model_max_length = args.ctx
    model.save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    report = {"args": {k: str(v) for k, v in vars(args).items()},
              "n_params": sum(p.numel() for p in model.parameters()),
              "corpus_chars": len(text), "corpus_tokens": len(ids),
              "seconds": round(time.time() - t0), "history": history,
              "final_scores": head_scores(model, len(tokenizer), val_ids)}
    earlier = (json.loads((args.init / "training_log.json").read_text())["stages"]
               if args.init else [])
    log = {"stages": earlier + [report]}
    (args.out / "training_log.json").write_text(json.dumps(log, indent=1))
    write_card(args.out)


if __name__ == "__main__":
    main()
