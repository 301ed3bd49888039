"""Plain ``transformers`` copies of a model, apart from the app's shared bridge: loaded under
the load lock, and measured (loss over a corpus, forward-pass time in alternation).

Every ``from_pretrained`` here takes :data:`models.model.load_lock.LOAD_LOCK`: it patches
process-wide state in torch and transformers, and a load beside another load in the app fails
("Cannot copy out of meta tensor") and breaks every later one. Loss is the mean over texts of
each text's mean cross-entropy, on the same token ids the app's ablation uses. Forward-pass
times are taken in alternation, both models in every round, and the after/before ratio is the
median of the per-round ratios.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from models.heads.pruning.loss import LossTask, loss_from_logits
from models.model.load_lock import LOAD_LOCK
from models.model.resume import run_standalone
from models.model.spec import ModelSpec

TIMING_ROUNDS = 7


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
    """Whether ``hf_model`` ends in a language-model head (so a loss can be measured)."""
    return getattr(hf_model, "get_output_embeddings", lambda: None)() is not None


def load_fresh(spec: ModelSpec) -> Any:
    """The model's own weights as a plain ``transformers`` model (float32 unless the spec says
    otherwise), eager attention, on the spec's device; under the load lock."""
    import transformers

    with LOAD_LOCK:
        config = transformers.AutoConfig.from_pretrained(
            spec.path_or_name, trust_remote_code=spec.trust_remote_code
        )
        model = auto_class(config).from_pretrained(
            spec.path_or_name,
            dtype=spec.torch_dtype,
            attn_implementation="eager",
            trust_remote_code=spec.trust_remote_code,
        )
        return model.to(spec.device).eval()


def load_back(directory: Path, config: Any, device: str) -> Any:
    """A checkpoint this module wrote, loaded with plain ``transformers`` under the load lock."""
    with LOAD_LOCK:
        model = auto_class(config).from_pretrained(directory, attn_implementation="eager")
        return model.to(device).eval()


def corpus_loss(hf_model: Any, tasks: Sequence[LossTask]) -> float:
    """Mean over texts of each text's loss, run through ``hf_model``."""
    return float(
        np.mean([float(loss_from_logits(run_standalone(hf_model, t.ids), t.labels)) for t in tasks])
    )


def timed(hf_model: Any, tasks: Sequence[LossTask]) -> float:
    """Seconds of one forward pass over every task."""
    start = time.perf_counter()
    for task in tasks:
        run_standalone(hf_model, task.ids)
    return time.perf_counter() - start


def compare_times(
    before: Any, after: Any, tasks: Sequence[LossTask], rounds: int = TIMING_ROUNDS
) -> tuple[float, float, float]:
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
    ratio = statistics.median(b / a for a, b in zip(first, second, strict=True))
    return statistics.median(first), statistics.median(second), ratio
