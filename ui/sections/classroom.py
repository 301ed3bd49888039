"""Classroom sections on typed matrices and on the loaded model (UI only; maths in models/)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from models.classroom import real, steps
from models.cost import Cost
from models.errors import UserError
from models.head import Head
from models.model.facts import ModelFacts
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Classroom
from ui.runtime.job_keys import LayerKey
from ui.text import md
from ui.widgets import job_view
from ui.widgets.matrix import show
from viz.classroom_figures import labels

MATRICES = ("q", "k", "v")
K_CAUSAL = Classroom.CAUSAL
K_LAYER, K_HEAD = Classroom.LAYER, Classroom.HEAD
K_START, K_WIDTH = Classroom.START, Classroom.WIDTH
SHOWN_DIMS = 8
SHOWN_TOKENS = 8
MAX_TOKENS = 512  # the real-model tab reads at most this many tokens of the sidebar prompt


def _widget_key(name: str) -> str:
    return Classroom.matrix(name)


def _saved_key(name: str) -> str:
    return Classroom.saved_matrix(name)


def load_example(name: str) -> None:
    """on_click: put worked example ``name`` in the three text boxes."""
    for m in MATRICES:
        st.session_state[_widget_key(m)] = st.session_state[_saved_key(m)] = steps.EXAMPLES[name][m]


def _restore_inputs() -> None:
    """Text typed earlier survives page switches (widget keys are dropped off-page)."""
    for m in MATRICES:
        if _widget_key(m) not in st.session_state:
            st.session_state[_widget_key(m)] = st.session_state.get(
                _saved_key(m), steps.EXAMPLES["A"][m]
            )
    if K_CAUSAL not in st.session_state:
        st.session_state[K_CAUSAL] = st.session_state.get(Classroom.SAVED_CAUSAL, False)


def _inputs() -> tuple[str, str, str, bool]:
    _restore_inputs()
    b = st.columns([1, 1, 2])
    b[0].button("Example A (2 tokens)", on_click=load_example, args=("A",), key=Classroom.EXAMPLE_A)
    b[1].button("Example B (3 tokens)", on_click=load_example, args=("B",), key=Classroom.EXAMPLE_B)
    b[2].toggle("Causal mask (hide later keys)", key=K_CAUSAL)
    st.caption(
        "One row per token: rows separated by `;` or new lines, numbers by commas. "
        f"Up to {steps.MAX_SIZE} × {steps.MAX_SIZE}. Q and K need the same number of "
        "columns (d_k); K and V the same number of rows."
    )
    cols = st.columns(3)
    texts = []
    for col, m in zip(cols, MATRICES, strict=True):
        texts.append(col.text_area(m.upper(), key=_widget_key(m), height=110))
        st.session_state[_saved_key(m)] = texts[-1]
    st.session_state[Classroom.SAVED_CAUSAL] = st.session_state[K_CAUSAL]
    return texts[0], texts[1], texts[2], bool(st.session_state[K_CAUSAL])


def step_by_step() -> None:
    """Editable Q, K, V and every intermediate of scaled dot-product attention."""
    st.subheader("Scaled dot-product attention, one step at a time")
    q_text, k_text, v_text, causal = _inputs()
    try:
        s = steps.steps_from_text(q_text, k_text, v_text, causal=causal)
    except steps.MatrixError as err:
        st.error(f"Cannot compute attention: {err}")
        return
    _show_steps(s, causal)


def _show_steps(s: steps.AttentionSteps, causal: bool) -> None:
    """Q, K, V, then scores, scaled scores, (masked scores), weights and A V, all labelled."""
    nq, nk, dv = s.q.shape[0], s.k.shape[0], s.v.shape[1]
    qs, ks = labels("q", nq), labels("k", nk)
    c = list(st.columns(3))
    with c[0]:
        show(s.q, qs, labels("d", s.d_k), decimals=2, title="Q (queries)")
    with c[1]:
        show(s.k, ks, labels("d", s.d_k), decimals=2, title="K (keys)")
    with c[2]:
        show(s.v, labels("v", nk), labels("d", dv), decimals=2, title="V (values)")
    c = list(st.columns(3 if causal else 2))
    with c[0]:
        st.markdown(
            "**1. Scores.** Compare each query with each key: row i, column j is q_i · k_j."
        )
        show(s.scores, qs, ks, decimals=3, title="S = Q Kᵀ")
    with c[1]:
        st.markdown(
            f"**2. Scale.** Divide by √d_k = √{s.d_k} = {1 / s.scale:.3f}, so the "
            "spread stays near 1 however wide the vectors are."
        )
        show(s.scaled, qs, ks, decimals=3, title=f"S / √{s.d_k}")
    if causal:
        with c[2]:
            st.markdown(
                "**2b. Causal mask.** No looking ahead: every key after the query "
                "becomes −∞, and e^(−∞) = 0."
            )
            show(s.logits, qs, ks, decimals=3, title="masked scores")
    c = list(st.columns(3 if causal else 2))
    with c[0]:
        masked = " (masked)" if causal else ""
        st.markdown(
            f"**3. Softmax along each row** of the scaled scores{masked}: exponentiate, "
            "then divide by the row's total, so each row becomes weights that sum to 1."
        )
        show(
            s.weights,
            qs,
            ks,
            decimals=3,
            title=f"A = softmax(S / √{s.d_k})",
            shade=True,
            shade_range=(0.0, 1.0),
        )
    with c[-1]:
        st.markdown(
            "**4. Mix the values.** Output row i is the average of the value rows, "
            "weighted by row i of A."
        )
        show(s.output, qs, labels("d", dv), decimals=2, title="A V (one output row per query)")
    if causal:
        with c[1]:
            st.markdown(
                "**Renormalised.** A masked row keeps the visible weights of the "
                "unmasked row in proportion, rescaled to sum to 1."
            )
            free = steps.attention_steps(s.q, s.k, s.v)
            show(
                free.weights,
                qs,
                ks,
                decimals=3,
                title="the same rows without the mask",
                shade=True,
                shade_range=(0.0, 1.0),
            )


def _clamp(key: str, low: int, high: int, default: int) -> None:
    """Keep a stored choice inside the range the current model and prompt allow."""
    value = st.session_state.get(key, default)
    st.session_state[key] = int(min(max(value, low), high))


def _window_controls(facts: ModelFacts, n_tokens: int) -> tuple[int, int, int, int]:
    most = min(SHOWN_TOKENS, n_tokens)
    _clamp(K_LAYER, 0, facts.n_layers - 1, 0)
    _clamp(K_HEAD, 0, facts.n_heads - 1, 0)
    _clamp(K_WIDTH, 1, most, most)
    _clamp(K_START, 0, n_tokens - st.session_state[K_WIDTH], 0)
    c = list(st.columns(4))
    layer = c[0].selectbox("Layer", range(facts.n_layers), key=K_LAYER)
    head = c[1].selectbox("Head", range(facts.n_heads), key=K_HEAD)
    if most > 1:
        c[2].slider("Tokens shown", 1, most, key=K_WIDTH)
    width = st.session_state[K_WIDTH]
    c[3].number_input("First token shown", 0, n_tokens - width, key=K_START)
    return layer, head, int(st.session_state[K_START]), int(width)


def _report_check(check: real.HeadCheck, acts: real.LayerActivations, facts: ModelFacts) -> None:
    errors = [("hook_pattern", check.pattern_error), ("hook_z", check.z_error)]
    if check.score_error is not None:
        errors.insert(0, ("hook_attn_scores", check.score_error))
    text = "; ".join(f"{name} within {err:.1e}" for name, err in errors)
    if max(err for _, err in errors) <= 1e-5:
        st.success(f"The classroom's numbers agree with the model's own: {text}.")
    else:
        st.warning(
            f"The recomputation differs from the model: {text}. This model may add "
            "something the textbook formula leaves out (ALiBi or relative-position "
            "biases, soft-capping, a sliding window)."
        )
    if acts.rotated:
        st.caption(
            "Rotary positions: q and k are taken after the rotation, since those are "
            "what the scores are made from."
        )
    if acts.scores_are_weights:
        st.caption(
            "For this architecture the bridge's `hook_attn_scores` carries the weights "
            "after the softmax, so only the pattern and z are compared."
        )
    if facts.n_kv_heads != facts.n_heads:
        st.caption(
            f"{facts.attention_kind}: query head {st.session_state[K_HEAD]} reads "
            f"key/value head {check.kv_head}."
        )


def layer_activations(
    model: ModelHandle, prompt: str, layer: int
) -> real.LayerActivations | job_view.Pending:
    """One layer's q, k, v, scores, pattern and z on the prompt's first tokens, as a job
    (:data:`ui.widgets.job_view.MISSING` while it runs)."""
    facts = model.facts
    key = LayerKey(session.allowed_spec(model), prompt, layer, MAX_TOKENS)
    return job_view.run_job(
        key,
        f"Reading layer {layer}'s q, k and v from the model",
        lambda progress: real.layer_activations(model, prompt, layer, MAX_TOKENS),
        cost=Cost(
            flops=facts.forward_flops(MAX_TOKENS),
            peak_bytes=facts.activation_bytes(MAX_TOKENS)
            + 6 * 4 * facts.n_heads * MAX_TOKENS * max(MAX_TOKENS, facts.d_head),
        ),
    )


def real_model() -> ModelFacts | None:
    """The same steps on one head of the loaded model; returns its facts for other sections."""
    st.subheader("The same steps inside the loaded model")
    model = session.active_model()
    if model is None:
        st.info(
            "No model is loaded, so this section is empty; the other sections work without one."
        )
        return None
    facts, prompt = model.facts, session.current_prompt()
    if model.spec.kind == "bundled":
        st.caption(
            "Tip: the same steps on a real language model's head: choose SmolLM2-135M "
            "(offline) in the sidebar (30 layers × 9 heads, 3 key/value heads, RoPE)."
        )
    try:
        n_tokens = real.token_count(model, prompt, MAX_TOKENS)
    except UserError as err:
        st.info(f"{md(err)} This section uses the sidebar prompt.")
        return facts
    layer, head, start, width = _window_controls(facts, n_tokens)
    try:
        acts = layer_activations(model, prompt, layer)
        if acts is job_view.MISSING:
            return facts
        check = real.head_steps(acts, head)
    except UserError as err:
        session.show_error(err)
        return facts
    _report_check(check, acts, facts)
    stop = min(start + width, acts.n_tokens)
    toks = [f"({i}) {t}" for i, t in enumerate(acts.tokens)][start:stop]
    s, dims = check.steps, min(SHOWN_DIMS, facts.d_head)
    few = min(4, dims)
    c = list(st.columns(3))
    for col, name, mat in zip(c, ("Q", "K", "V"), (s.q, s.k, s.v), strict=True):
        with col:
            show(
                mat[start:stop, :few],
                toks,
                labels("d", few),
                decimals=3,
                title=f"{name} (first {few} of {facts.d_head} dims)",
                compact=True,
            )
    masked = " with the causal mask" if facts.causal else ""
    textbook = abs(acts.scale - facts.d_head**-0.5) < 1e-9
    scaled = f"Q Kᵀ / √{facts.d_head}" if textbook else f"Q Kᵀ × {acts.scale:.4g}"
    show(
        real.window(s.logits, start, stop),
        toks,
        toks,
        decimals=3,
        title=f"{scaled} (scaled scores{masked})",
        compact=True,
    )
    rest = real.mass_outside(s.weights, start, stop)
    c = list(st.columns([5, 1])) if np.any(rest > 1e-6) else [st.container()]
    with c[0]:
        show(
            real.window(s.weights, start, stop),
            toks,
            toks,
            decimals=3,
            title="A = softmax (over every visible key)",
            shade=True,
            shade_range=(0.0, 1.0),
            compact=True,
        )
    if len(c) > 1:
        with c[1]:
            show(rest[:, None], toks, ["rest"], decimals=3, title="keys not shown", compact=True)
    note = f" (first {dims} of {facts.d_head} dims)" if dims < facts.d_head else ""
    show(
        s.output[start:stop, :dims],
        toks,
        labels("d", dims),
        decimals=3,
        title="A V = z" + note,
        compact=True,
    )
    chosen = Head(layer, head)
    st.markdown(f"[Open head {chosen} in the explorer]({session.explorer_link(chosen)})")
    st.caption(
        "For teachers: the model's q, k and v already include the projection biases. "
        "The scale is read from the model's own attention layer: GPT-2 and BERT use "
        "1/√d_head exactly as in the formula above; some models fold in another factor."
    )
    return facts


TEXT_SIZES = {
    "normal": "Normal text",
    "large": "Large text (projector)",
    "larger": "Larger text (back row)",
}
_SCALE = {"normal": 1.0, "large": 1.25, "larger": 1.5}
ROOT_PX = 16  # the browser's (and Streamlit's) root font size


def projector_options() -> None:
    """Text size for a projector, and a hint to give the tables the sidebar's room."""
    left, right = st.columns([2, 3])
    size = left.selectbox(
        "Text size",
        list(TEXT_SIZES),
        key=Classroom.TEXT_SIZE,
        format_func=TEXT_SIZES.__getitem__,
        help="Larger text for the back of the room.",
    )
    right.caption(
        "On a projector (1,280 × 720), collapse the sidebar with « at its top: the "
        "matrices get its room. Wide matrices scroll sideways instead of being cut."
    )
    scale = _SCALE[size]
    if scale != 1.0:  # every text size of the page is in rem: the root's size scales them all
        st.html(f"<style>html {{ font-size: {ROOT_PX * scale:g}px; }}</style>")
