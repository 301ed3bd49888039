"""Each job's time estimate against the time it took; prints numbers, never fails on time.

A visitor decides whether to press a button from its estimate, and the server refuses work
whose estimate is over the operator's limit, so an estimate far off either way misleads. For
one model this runs, for each kind of job below, the estimator the page shows (at the assumed
rate :data:`models.cost.ASSUMED_FLOPS`, before the job pool has learnt this machine's rate
for the kind) and then the job itself, twice (the first run also pays for lazy imports and
warm-up; the second is reported), and prints the ratio estimate / measured. The target is a
ratio within 0.5-2; ``off`` marks the others.

The server's job pool then scales each kind's estimate by how this machine did on it, and
a kind it has not run yet by the median of the kinds it has (:class:`ui.runtime.jobs.Throughput`).
The column ``borrowed`` is that first estimate of each kind: the same pool fed every other
kind's measured time first.

Kinds: the head atlas, corpus scores, induction on repeated tokens, weight scores,
zero-ablation importance, generation, the explorer's capture and its value weighting.

    python -m benchmarks.estimates                      # the bundled model
    python -m benchmarks.estimates --model smollm2 --texts 8 --tokens 256

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from benchmarks.machine import describe, line
from models.capture.run import capture
from models.capture.weighted import value_norms, value_weighting, weighting_cost
from models.circuits.cost import weights_cost
from models.circuits.weight_circuits import weight_scores
from models.cost import Cost
from models.generate.cost import generation_estimate
from models.generate.generation import generate
from models.generate.settings import GenerationSettings
from models.heads.atlas.compute import atlas_estimate, compute_atlas
from models.heads.finding.corpus import default_corpus
from models.heads.finding.corpus_scores import score_corpus, score_estimate
from models.heads.finding.induction import (
    DEFAULT_BATCH,
    DEFAULT_SEED,
    DEFAULT_SEQ_LEN,
    measure_repeated,
    repeated_estimate,
)
from models.heads.pruning.importance import importance_estimate, measure_corpus_importance
from models.heads.pruning.loss import corpus_tasks
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from models.model.loading import load
from models.model.spec import ModelSpec
from ui.runtime.jobs import Throughput

Kind = tuple[Cost, Callable[[], object]]
LOW, HIGH = 0.5, 2.0


def kinds(model: ModelHandle, texts: list[str], tokens: int, new: int) -> dict[str, Kind]:
    """Each kind's estimate and a call that does the work, on ``texts`` cut to ``tokens``."""
    sizes = [int(tokenize(model, text, tokens)[0].shape[1]) for text in texts]
    prompt = " ".join(texts)
    n_prompt = int(tokenize(model, prompt, tokens)[0].shape[1])
    run = capture(model, prompt, max_tokens=tokens)
    # generation's prompt leaves room for what it writes within the model's context
    room = min(tokens, model.facts.n_ctx) - new - 2
    written = tokenize(model, prompt, room)[0][0].tolist()
    start = model.tokenizer.decode(written, skip_special_tokens=True)
    n_start = int(tokenize(model, start)[0].shape[1])
    ids = torch.tensor([run.token_ids])
    settings = GenerationSettings(max_new_tokens=new)
    vocab = int(getattr(model.tokenizer, "vocab_size", 50_000) or 50_000)
    corpus = default_corpus(model).head(len(texts))
    facts = model.facts
    return {
        "atlas": (atlas_estimate(model, sizes), lambda: compute_atlas(model, corpus, tokens)),
        "corpus scores": (
            score_estimate(model, sizes),
            lambda: score_corpus(model, texts, tokens),
        ),
        "repeated tokens": (
            repeated_estimate(model, DEFAULT_SEQ_LEN, DEFAULT_BATCH),
            lambda: measure_repeated(model, DEFAULT_SEQ_LEN, DEFAULT_BATCH, DEFAULT_SEED),
        ),
        "weight scores": (
            weights_cost(model, composition=False).cost,
            lambda: weight_scores(model),
        ),
        "zero ablation": (
            importance_estimate(model, sizes, ("zero",)),
            lambda: measure_corpus_importance(model, corpus_tasks(model, texts, tokens), ("zero",)),
        ),
        "generation": (
            generation_estimate(facts, n_start, new, "cpu", 4, vocab),
            lambda: generate(model, start, settings),
        ),
        "capture": (
            Cost(flops=facts.forward_flops(n_prompt)),
            lambda: capture(model, prompt, max_tokens=tokens),
        ),
        "value weighting": (
            weighting_cost(run),
            lambda: value_weighting(run, value_norms(model, ids)),
        ),
    }


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="bundled")
    parser.add_argument("--texts", type=int, default=8, help="texts of the bundled corpus")
    parser.add_argument("--tokens", type=int, default=128, help="tokens per text, at most")
    parser.add_argument("--new", type=int, default=32, help="tokens generation writes")
    parser.add_argument("--only", nargs="*", help="kinds to run (all when left out)")
    args = parser.parse_args()
    machine = describe()
    print(f"machine: {line(machine)}", flush=True)
    model = load(ModelSpec(args.model))
    texts = default_corpus(model).texts[: args.texts]
    found, costs = {}, {}
    for name, (cost, work) in kinds(model, texts, args.tokens, args.new).items():
        if args.only and name not in args.only:
            continue
        timed(work)  # warm-up: imports, first allocations
        seconds = timed(work)
        estimate = cost.seconds()
        ratio = estimate / seconds
        said = f"estimate {estimate:8.2f} s, took {seconds:8.2f} s, {ratio:6.2f}x{off(ratio)}"
        print(f"{name:>16}: {said}")
        found[name] = {"estimate_s": estimate, "measured_s": seconds, "ratio": ratio}
        costs[name] = cost
    print("first estimate of each kind after the others ran (the pool's borrowed rate):")
    for name, cost in costs.items():
        pool = Throughput()
        for other, seen in found.items():
            if other != name:
                pool.record(other, costs[other], seen["measured_s"])
        borrowed = pool.seconds(name, cost)
        ratio = borrowed / found[name]["measured_s"]
        print(f"{name:>16}: borrowed {borrowed:8.2f} s, {ratio:6.2f}x{off(ratio)}")
        found[name] |= {"borrowed_s": borrowed, "borrowed_ratio": ratio}
    print(json.dumps({"model": args.model, "machine": machine, "kinds": found}))


def off(ratio: float) -> str:
    return "" if LOW <= ratio <= HIGH else "  off"


if __name__ == "__main__":
    main()
