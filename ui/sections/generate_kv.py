"""The Generate page's KV cache: its size for the loaded model by the formula, beside the same
model with MHA and MQA, as the text grows, layer by layer where layers differ (only global layers
grow), and the bytes read from the real cache after a generation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from models.classroom.costs import human_bytes
from models.generate import Generation
from models.generate.kv import (
    SHARINGS,
    growing_bytes_per_token,
    kv_growth,
    kv_heads,
)
from models.model.handle import ModelHandle
from models.model.variants import LayerVariant, all_plain, layer_variants
from ui.keys import Generate
from ui.text import md
from viz.generate_figures import kv_cache_figure


def sharing_names(model: ModelHandle) -> dict[str, str]:
    facts = model.facts
    return {
        "model": f"this model ({facts.attention_kind}, {facts.n_kv_heads} key/value heads)",
        "MHA": f"MHA: one key/value head per query head, {facts.n_heads}"
        + (" (the same as this model)" if facts.n_kv_heads == facts.n_heads else ""),
        "MQA": "MQA: one key/value head for all"
        + (" (the same as this model)" if facts.n_kv_heads == 1 else ""),
    }


def kv_section(model: ModelHandle, gen: Generation | None) -> None:
    """Bytes per token and in total for the loaded model, MHA and MQA; the real cache's."""
    facts, dtype = model.facts, model.spec.torch_dtype
    if not facts.causal:
        st.info(
            f"{md(facts.name)} is an encoder: it reads the whole text in one pass and keeps "
            "no KV cache. Load a decoder such as SmolLM2 to see one grow."
        )
        return
    size = dtype.itemsize
    variants = layer_variants(model)
    layered = not all_plain(variants)
    # every layer of a plain model grows: the same as the every-layer formula
    per_token = {s: growing_bytes_per_token(facts, variants, size, s) for s in SHARINGS}
    at_context = kv_growth(facts, np.array([facts.n_ctx]), size, variants)
    if layered:
        st.markdown(layered_text(variants, per_token["model"], at_context["model"][0], facts.n_ctx))
    else:
        st.markdown(
            f"Every token read leaves a key and a value vector per layer and key/value head: "
            f"2 × {facts.n_layers} layers × {facts.n_kv_heads} key/value heads × "
            f"{facts.d_head} (d_head) × {size} bytes ({str(dtype).removeprefix('torch.')}) = "
            f"**{per_token['model']:,} bytes ({human_bytes(per_token['model'])}) per token**, "
            f"{human_bytes(per_token['model'] * facts.n_ctx)} at the full context of "
            f"{facts.n_ctx:,} tokens"
            + (
                "."
                if size == 2
                else f" ({per_token['model'] // size * 2:,} bytes per token in bfloat16)."
            )
        )
    names = sharing_names(model)
    n_text = gen.cache_tokens if gen is not None else None
    at_text = kv_growth(facts, np.array([n_text or 1]), size, variants)
    table = pd.DataFrame(
        {
            "cache": [names[s] for s in SHARINGS],
            "key/value heads": [kv_heads(facts, s) for s in SHARINGS],
            ("bytes per token (global layers)" if layered else "bytes per token"): [
                per_token[s] for s in SHARINGS
            ],
            **(
                {f"at {n_text:,} tokens": [human_bytes(at_text[s][0]) for s in SHARINGS]}
                if n_text
                else {}
            ),
            f"at {facts.n_ctx:,} tokens": [human_bytes(at_context[s][0]) for s in SHARINGS],
        }
    )
    st.dataframe(table, hide_index=True, width="stretch", key=Generate.KV_TABLE)
    lengths = np.unique(np.linspace(1, facts.n_ctx, 64).astype(np.int64))
    measured = (gen.cache_tokens, gen.cache_bytes) if gen is not None else None
    st.plotly_chart(
        kv_cache_figure(
            lengths, kv_growth(facts, lengths, size, variants), measured=measured, names=names
        ),
        width="stretch",
        key=Generate.KV_FIGURE,
    )
    if gen is not None:
        formula = int(kv_growth(facts, np.array([gen.cache_tokens]), size, variants)["model"][0])
        measured_note(gen, formula, per_token["model"], layered)
    else:
        measured_note(None, 0, per_token["model"], layered)


def layered_text(
    variants: tuple[LayerVariant, ...], per_token: int, full: float, n_ctx: int
) -> str:
    """What grows in a model whose layers differ: the global layers only."""
    kinds = {
        "global": sum(layer.kind == "softmax" for layer in variants),
        "sliding": sum(layer.kind == "sliding" for layer in variants),
        "linear": sum(layer.kind == "linear" for layer in variants),
    }
    windows = sorted(
        {layer.window for layer in variants if layer.kind == "sliding" and layer.window}
    )
    parts = [f"{kinds['global']} global layer{'s' if kinds['global'] != 1 else ''}"]
    if kinds["sliding"]:
        parts.append(
            f"{kinds['sliding']} sliding-window layer{'s' if kinds['sliding'] != 1 else ''} "
            f"(window {', '.join(f'{w:,}' for w in windows)}: each keeps its last window − 1 "
            "tokens, then stops growing)"
        )
    if kinds["linear"]:
        parts.append(
            f"{kinds['linear']} linear-attention layer{'s' if kinds['linear'] != 1 else ''} "
            "(a fixed-size state, no keys or values)"
        )
    latent = any(layer.latent for layer in variants)
    return (
        f"This model has {', '.join(parts)}. Only the global layers' caches grow with the "
        f"text: **{per_token:,} bytes"
        + (f" ({human_bytes(per_token)})" if per_token >= 1024 else "")
        + " per token**"
        + (
            " (each caches its compressed key/value latent and shared rotated key)"
            if latent
            else ""
        )
        + f"; {human_bytes(full)} in all at the full context of {n_ctx:,} tokens."
    )


def measured_note(gen: Generation | None, formula: int, per_token: int, layered: bool) -> None:
    if gen is None:
        st.caption("Generate some text above to read the size of the real cache it leaves.")
        return
    how = (
        "the layer-by-layer count (global layers every token, sliding layers their window − 1)"
        if layered
        else f"the formula, {per_token:,} × {gen.cache_tokens:,},"
    )
    said = (
        f"Read from the real cache object after this generation: **{gen.cache_bytes:,} "
        f"bytes** for {gen.cache_tokens:,} tokens (prompt and output; the last token written "
        f"was never fed back). {how[0].upper() + how[1:]} gives {formula:,} bytes: "
    )
    if gen.cache_bytes == formula:
        st.success(said + "they are equal.")
    else:
        st.warning(said + f"they differ by {gen.cache_bytes - formula:+,} bytes.")
