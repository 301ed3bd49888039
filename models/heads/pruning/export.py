"""Write a pruned checkpoint and measure it against the original on a corpus.

The pruned model is built from a fresh copy of the model's own Hugging Face weights (the loaded
bridge, shared by every session, is never touched), saved with ``save_pretrained`` beside the
original tokenizer, and loaded back from disk with plain ``transformers`` before it is
measured, so the figures describe the files a user downloads. Loss before and after is the
mean over texts of each text's mean next-token cross-entropy, on the same token ids the app's
ablation uses. Forward-pass times are taken in alternation, both models in every round, and
the after/before ratio is the median of the per-round ratios.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import statistics
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from models.heads.loss import LossTask, loss_from_logits
from models.heads.prune import (PrunePlan, apply_plan, dead_parameters, family, n_parameters,
                                plan_pruning)
from models.model.resume import run_standalone
from models.model.gguf import cache_dir
from models.model.spec import ModelSpec
from models.progress import Progress, quiet

TIMING_ROUNDS = 7


@dataclass(frozen=True)
class PruneReport:
    """Before/after figures of a pruned checkpoint on a corpus (losses None without an LM)."""

    plan: PrunePlan
    directory: str
    loss_before: float | None
    loss_after: float | None
    params_before: int
    params_after: int
    params_effective: int
    seconds_before: float
    seconds_after: float
    time_ratio: float
    n_texts: int
    n_tokens: int

    def lines(self) -> list[str]:
        """The report as plain lines (command line, pruning.json)."""
        loss = ("loss: not measured (no language-model head)" if self.loss_before is None else
                f"loss on {self.n_texts} texts ({self.n_tokens} tokens): {self.loss_before:.4f} "
                f"-> {self.loss_after:.4f} ({self.loss_after - self.loss_before:+.4f})")
        return [self.plan.describe(), loss,
                f"parameters stored: {self.params_before:,} -> {self.params_after:,} "
                f"({self.params_after / self.params_before:.1%})",
                f"parameters in use (masked heads' weights left out): {self.params_effective:,}",
                f"forward pass over the corpus: {self.seconds_before * 1e3:.1f} ms -> "
                f"{self.seconds_after * 1e3:.1f} ms (after/before {self.time_ratio:.3f}, median "
                f"of {TIMING_ROUNDS} alternating rounds)",
                f"written to {self.directory}"]


def auto_class(config: Any) -> Any:
    """The ``transformers`` auto class that keeps every weight of the checkpoint: a BERT with
    a masked-LM head loads as one, a bare encoder as ``AutoModel``, everything else as a
    causal LM."""
    import transformers

    if getattr(config, "model_type", "") == "bert":
        masked = any("MaskedLM" in name for name in getattr(config, "architectures", None) or [])
        return transformers.AutoModelForMaskedLM if masked else transformers.AutoModel
    return transformers.AutoModelForCausalLM


def has_lm_head(hf_model: Any) -> bool:
    return getattr(hf_model, "get_output_embeddings", lambda: None)() is not None


def load_fresh(spec: ModelSpec) -> Any:
    """The model's own weights as a plain ``transformers`` model (float32 unless the spec says
    otherwise), eager attention, on the spec's device."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(spec.path_or_name,
                                                     trust_remote_code=spec.trust_remote_code)
    model = auto_class(config).from_pretrained(spec.path_or_name, dtype=spec.torch_dtype,
                                 attn_implementation="eager",
                                 trust_remote_code=spec.trust_remote_code)
    return model.to(spec.device).eval()


def export_dir(spec: ModelSpec, heads: Sequence[tuple[int, int]]) -> Path:
    """Where the page writes a pruned checkpoint: one folder per (model, pruned heads)."""
    key = json.dumps([spec.name, spec.dtype, sorted(map(list, heads))])
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(spec.name).name or "model").strip("-")[:40]
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return cache_dir() / "pruned" / f"{slug}-{len(heads)}h-{digest}"


def corpus_loss(hf_model: Any, tasks: Sequence[LossTask]) -> float:
    """Mean over texts of each text's loss, run through ``hf_model``."""
    return float(np.mean([float(loss_from_logits(run_standalone(hf_model, t.ids), t.labels))
                          for t in tasks]))


def timed(hf_model: Any, tasks: Sequence[LossTask]) -> float:
    start = time.perf_counter()
    for task in tasks:
        run_standalone(hf_model, task.ids)
    return time.perf_counter() - start


def compare_times(before: Any, after: Any, tasks: Sequence[LossTask],
                  rounds: int = TIMING_ROUNDS) -> tuple[float, float, float]:
    """Seconds per pass over ``tasks`` of each model and their ratio, measured in alternation.

    Each round times both models back to back (the order flips every round), so a change in
    the machine's load hits both; the ratio is the median of the per-round ratios.

    Returns:
        ``(median seconds before, median seconds after, median after/before ratio)``.
    """
    timed(before, tasks)
    timed(after, tasks)
    first, second = [], []
    for round_ in range(rounds):
        if round_ % 2:
            second.append(timed(after, tasks))
            first.append(timed(before, tasks))
        else:
            first.append(timed(before, tasks))
            second.append(timed(after, tasks))
    ratio = statistics.median(b / a for a, b in zip(first, second))
    return statistics.median(first), statistics.median(second), ratio


def write_checkpoint(spec: ModelSpec, pruned: Any, directory: Path, plan: PrunePlan) -> None:
    """``save_pretrained`` of the weights and the original tokenizer, written atomically."""
    import transformers

    directory = Path(directory)
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    pruned.save_pretrained(partial)
    transformers.AutoTokenizer.from_pretrained(
        spec.path_or_name, trust_remote_code=spec.trust_remote_code).save_pretrained(partial)
    (partial / "pruning.json").write_text(json.dumps(
        {"source": spec.name, "heads": [f"{l}.{h}" for l, h in plan.heads],
         "removed_groups": {str(l): list(g) for l, g in plan.removed.items()},
         "masked": [f"{l}.{h}" for l, h in plan.masked], "what": plan.describe()}, indent=1))
    shutil.rmtree(directory, ignore_errors=True)
    partial.rename(directory)


def prune_and_export(spec: ModelSpec, heads: Sequence[tuple[int, int]], directory: Path,
                     tasks: Sequence[LossTask], progress: Progress = quiet) -> PruneReport:
    """Prune ``heads`` from a fresh copy of ``spec``'s weights, write it to ``directory``, load
    it back and compare it with the original on ``tasks``.

    Raises:
        models.heads.prune.PruneError: an architecture or head the recipe does not cover.
    """
    progress(0.0, "loading a fresh copy of the weights")
    original = load_fresh(spec)
    fam = family(original)
    config = original.config
    n_heads = int(getattr(config, "num_attention_heads", None) or config.n_head)
    n_kv = int(getattr(config, "num_key_value_heads", None) or n_heads)
    d_head = int(getattr(config, "head_dim", None) or config.hidden_size // n_heads)
    plan = plan_pruning(fam, int(config.num_hidden_layers), n_heads, n_kv, d_head, heads)
    progress(0.1, "pruning")
    pruned = apply_plan(load_fresh(spec), plan)
    dead = dead_parameters(pruned, plan)
    progress(0.2, f"writing {directory}")
    write_checkpoint(spec, pruned, directory, plan)
    del pruned
    progress(0.4, "loading the pruned checkpoint back from disk")
    reloaded = auto_class(original.config).from_pretrained(
        directory, attn_implementation="eager").to(spec.device).eval()
    has_lm = has_lm_head(original)
    progress(0.5, "loss before and after")
    before = corpus_loss(original, tasks) if has_lm else None
    after = corpus_loss(reloaded, tasks) if has_lm else None
    progress(0.6, f"timing both models, {TIMING_ROUNDS} alternating rounds")
    t_before, t_after, ratio = compare_times(original, reloaded, tasks)
    report = PruneReport(plan, str(directory), before, after, n_parameters(original),
                         n_parameters(reloaded), n_parameters(reloaded) - dead, t_before,
                         t_after, ratio, len(tasks), sum(int(t.ids.shape[1]) for t in tasks))
    info = json.loads((Path(directory) / "pruning.json").read_text())
    info["report"] = {k: v for k, v in asdict(report).items() if k != "plan"}
    (Path(directory) / "pruning.json").write_text(json.dumps(info, indent=1))
    progress(1.0, "done")
    return report


def zip_directory(directory: Path) -> Path:
    """``directory`` as ``<directory>.zip`` beside it (weights stored, text deflated)."""
    directory = Path(directory)
    target = directory.with_name(directory.name + ".zip")
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(partial, "w") as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                method = (zipfile.ZIP_STORED if path.suffix in (".safetensors", ".bin")
                          else zipfile.ZIP_DEFLATED)
                archive.write(path, f"{directory.name}/{path.relative_to(directory)}",
                              compress_type=method)
    partial.replace(target)
    return target
