"""Write a pruned checkpoint and measure it against the original on a corpus.

The pruned model is built from a fresh copy of the model's own Hugging Face weights (the loaded
bridge, shared by every session, is never touched), saved with ``save_pretrained`` beside the
original tokenizer, and loaded back from disk with plain ``transformers`` before it is
measured (:mod:`models.heads.pruning.standalone`), so the figures describe the files a user
downloads. Every read and write of weights takes :data:`models.model.load_lock.LOAD_LOCK`.
Checkpoints and their zips live under a root folder with a byte budget
(:mod:`models.disk_budget`): the least recently used go first, and nothing is written without
the disk space for it. No text meant for a visitor names a path on the server.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from models.cost import Cost, device_of
from models.disk_budget import entry_size, make_room, touch
from models.errors import UserError
from models.head import Head
from models.heads.pruning.loss import LossTask
from models.heads.pruning.prune import (
    PrunePlan,
    apply_plan,
    dead_parameters,
    family,
    n_parameters,
    plan_pruning,
)
from models.heads.pruning.standalone import (
    TIMING_ROUNDS,
    compare_times,
    corpus_loss,
    has_lm_head,
    load_back,
    load_fresh,
)
from models.model.handle import ModelHandle
from models.model.load_lock import LOAD_LOCK
from models.model.spec import ModelSpec
from models.progress import Progress, quiet

TOKENIZER_BYTES = 16 * 2**20  # room kept for the tokenizer files and pruning.json
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
DISK_BYTES_PER_S = 2e8  # writing, zipping and reading a checkpoint back (bytes a second)


class ExportError(UserError):
    """The pruned checkpoint could not be written or read back; the message says why."""


@dataclass(frozen=True)
class PruneReport:
    """Before/after figures of a pruned checkpoint on a corpus (losses None without an LM).

    ``directory`` is where the checkpoint was written, for the command line; text meant for a
    page (:meth:`lines`, :attr:`name`) never shows it.
    """

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

    @property
    def name(self) -> str:
        """The checkpoint folder's own name (no path), e.g. for a download's file name."""
        return Path(self.directory).name

    def lines(self) -> list[str]:
        """The report as plain lines (the page, the command line, pruning.json)."""
        if self.loss_before is None or self.loss_after is None:
            loss = "loss: not measured (no language-model head)"
        else:
            loss = (
                f"loss on {self.n_texts} texts ({self.n_tokens} tokens): "
                f"{self.loss_before:.4f} -> {self.loss_after:.4f} "
                f"({self.loss_after - self.loss_before:+.4f})"
            )
        return [
            self.plan.describe(),
            loss,
            f"parameters stored: {self.params_before:,} -> {self.params_after:,} "
            f"({self.params_after / self.params_before:.1%})",
            f"parameters in use (masked heads' weights left out): {self.params_effective:,}",
            f"forward pass over the corpus: {self.seconds_before * 1e3:.1f} ms -> "
            f"{self.seconds_after * 1e3:.1f} ms (after/before {self.time_ratio:.3f}, median "
            f"of {TIMING_ROUNDS} alternating rounds)",
        ]


def export_name(spec: ModelSpec, heads: Sequence[tuple[int, int]]) -> str:
    """The folder name of a pruned checkpoint: one per (model, dtype, pruned heads)."""
    chosen = sorted(Head(int(layer), int(index)) for layer, index in heads)
    key = json.dumps([spec.name, spec.dtype, [list(h) for h in chosen]])
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(spec.name).name or "model").strip("-")[:40]
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return f"{slug}-{len(chosen)}h-{digest}"


def checkpoint_bytes(n_params: int, dtype: str) -> int:
    """Disk space a checkpoint of ``n_params`` parameters needs, tokenizer included."""
    return n_params * DTYPE_BYTES.get(dtype, 4) + TOKENIZER_BYTES


def tokenizer_bytes(source: str) -> int:
    """Bytes of the tokenizer files in the model's folder (what an export copies beside the
    weights); :data:`TOKENIZER_BYTES` when the model was not read from a folder."""
    folder = Path(source) if source else None
    if folder is None or not folder.is_dir():
        return TOKENIZER_BYTES
    names = ("tokenizer", "vocab", "merges", "special_tokens_map", "added_tokens")
    return sum(
        f.stat().st_size for f in folder.iterdir() if f.is_file() and f.name.startswith(names)
    )


def export_estimate(
    model: ModelHandle, tasks: Sequence[LossTask], dtype: str | None = None
) -> tuple[Cost, int]:
    """The cost and the disk bytes of :func:`prune_and_export` writing a ``dtype`` checkpoint
    (default: the model's own), before it runs.

    Memory: two plain copies of the weights at once (the original and the pruned one, then the
    one read back) and one forward pass. Time: loading, writing and reading back, plus the
    loss and ``2 * (TIMING_ROUNDS + 2)`` timed passes over the corpus.

    Returns:
        ``(Cost, disk bytes of the checkpoint and of its zip together)``.
    """
    facts = model.facts
    weights = checkpoint_bytes(facts.n_params, model.spec.dtype)
    written = facts.n_params * DTYPE_BYTES.get(dtype or model.spec.dtype, 4) + tokenizer_bytes(
        model.source
    )
    passes = sum(facts.forward_flops(int(t.ids.shape[1])) for t in tasks)
    cost = Cost(
        flops=(2 * TIMING_ROUNDS + 6) * passes,
        peak_bytes=weights + written,
        overhead_s=5.0 + (weights + 2 * written) / DISK_BYTES_PER_S,
        device=device_of(model.spec.device),
    )
    return cost, 2 * written


def write_checkpoint(spec: ModelSpec, pruned: Any, directory: Path, plan: PrunePlan) -> None:
    """``save_pretrained`` of the weights and the original tokenizer, written atomically under
    the load lock.

    Raises:
        ExportError: the files could not be written (the message names no path).
    """
    import transformers

    directory = Path(directory)
    partial = directory.with_name(directory.name + ".partial")
    try:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        with LOAD_LOCK:
            pruned.save_pretrained(partial)
            transformers.AutoTokenizer.from_pretrained(
                spec.path_or_name, trust_remote_code=spec.trust_remote_code
            ).save_pretrained(partial)
        (partial / "pruning.json").write_text(
            json.dumps(
                {
                    "source": spec.public_name,
                    "heads": [str(h) for h in plan.heads],
                    "removed_groups": {str(layer): list(g) for layer, g in plan.removed.items()},
                    "masked": [str(h) for h in plan.masked],
                    "what": plan.describe(),
                },
                indent=1,
            )
        )
        shutil.rmtree(directory, ignore_errors=True)
        partial.rename(directory)
    except OSError as err:
        shutil.rmtree(partial, ignore_errors=True)
        raise ExportError(
            f"Could not write the pruned checkpoint: {err.strerror or type(err).__name__}."
        ) from err


def prune_and_export(
    spec: ModelSpec,
    heads: Sequence[tuple[int, int]],
    root: Path,
    tasks: Sequence[LossTask],
    progress: Progress = quiet,
    *,
    budget_bytes: int | None,
    name: str | None = None,
) -> PruneReport:
    """Prune ``heads`` from a fresh copy of ``spec``'s weights, write it to ``root / name``,
    load it back and compare it with the original on ``tasks``.

    Args:
        spec: the model (the loaded bridge is not touched).
        heads: the heads to prune.
        root: the folder checkpoints are written in.
        tasks: the corpus the report measures on.
        progress: ``progress(fraction, text)``; may raise to stop.
        budget_bytes: the most bytes ``root`` may hold (least recently used checkpoints are
            removed to make room); None for a folder of the user's own, where nothing is
            removed. The free disk space is checked either way.
        name: the checkpoint's folder name; :func:`export_name` when None.

    Raises:
        models.heads.pruning.prune.PruneError: an architecture or head the recipe does not cover.
        models.disk_budget.DiskSpaceError: no room for the checkpoint.
        ExportError: it could not be written.
    """
    directory = Path(root) / (name or export_name(spec, heads))
    progress(0.0, "loading a fresh copy of the weights")
    original = load_fresh(spec)
    fam = family(original)
    config = original.config
    n_heads = int(getattr(config, "num_attention_heads", None) or config.n_head)
    n_kv = int(getattr(config, "num_key_value_heads", None) or n_heads)
    d_head = int(getattr(config, "head_dim", None) or config.hidden_size // n_heads)
    plan = plan_pruning(fam, int(config.num_hidden_layers), n_heads, n_kv, d_head, heads)
    make_room(
        root,
        budget_bytes,
        checkpoint_bytes(n_parameters(original), spec.dtype),
        keep=[directory, zip_path(directory)],
    )
    progress(0.1, "pruning")
    pruned = apply_plan(load_fresh(spec), plan)
    dead = dead_parameters(pruned, plan)
    progress(0.2, "writing the checkpoint")
    write_checkpoint(spec, pruned, directory, plan)
    del pruned
    progress(0.4, "loading the pruned checkpoint back from disk")
    reloaded = load_back(directory, original.config, spec.device)
    has_lm = has_lm_head(original)
    progress(0.5, "loss before and after")
    before = corpus_loss(original, tasks) if has_lm else None
    after = corpus_loss(reloaded, tasks) if has_lm else None
    progress(0.6, f"timing both models, {TIMING_ROUNDS} alternating rounds")
    t_before, t_after, ratio = compare_times(original, reloaded, tasks)
    report = PruneReport(
        plan,
        str(directory),
        before,
        after,
        n_parameters(original),
        n_parameters(reloaded),
        n_parameters(reloaded) - dead,
        t_before,
        t_after,
        ratio,
        len(tasks),
        sum(int(t.ids.shape[1]) for t in tasks),
    )
    info = json.loads((directory / "pruning.json").read_text())
    info["report"] = {k: v for k, v in asdict(report).items() if k not in ("plan", "directory")}
    (directory / "pruning.json").write_text(json.dumps(info, indent=1))
    progress(1.0, "done")
    return report


def zip_path(directory: Path) -> Path:
    """Where :func:`zip_directory` puts the zip of ``directory``: beside it."""
    return Path(directory).with_name(Path(directory).name + ".zip")


def zip_directory(directory: Path, *, budget_bytes: int | None) -> Path:
    """``directory`` as ``<directory>.zip`` beside it (weights stored, text deflated).

    A zip newer than every file of the directory is served again, not rewritten. Both are
    marked as just used. The folder that holds them is under ``budget_bytes`` (None: no
    budget) and the free disk space is checked before writing.

    Raises:
        models.disk_budget.DiskSpaceError: no room for the zip.
        ExportError: it could not be written.
    """
    directory = Path(directory)
    target = zip_path(directory)
    newest = max((p.stat().st_mtime for p in directory.rglob("*") if p.is_file()), default=0.0)
    if target.is_file() and target.stat().st_mtime >= newest:
        touch(directory)
        touch(target)
        return target
    make_room(directory.parent, budget_bytes, entry_size(directory), keep=[directory, target])
    partial = target.with_name(target.name + ".partial")
    try:
        with zipfile.ZipFile(partial, "w") as archive:
            for path in sorted(directory.rglob("*")):
                if path.is_file():
                    method = (
                        zipfile.ZIP_STORED
                        if path.suffix in (".safetensors", ".bin")
                        else zipfile.ZIP_DEFLATED
                    )
                    archive.write(
                        path,
                        f"{directory.name}/{path.relative_to(directory)}",
                        compress_type=method,
                    )
        partial.replace(target)
    except OSError as err:
        partial.unlink(missing_ok=True)
        raise ExportError(
            f"Could not write the zip: {err.strerror or type(err).__name__}."
        ) from err
    touch(directory)
    return target
