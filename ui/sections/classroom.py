"""Classroom sections on typed matrices and on the loaded model (UI only; maths in models/)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import streamlit as st

from models.classroom import real, steps
from models.errors import UserError
from models.head import Head
from models.model.facts import ModelFacts
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Classroom
from ui.runtime.job_keys import LayerKey
from ui.session_state import keep
from ui.state import classroom as cl
from ui.state.classroom import ClassroomView
from ui.text import md
from ui.widgets import components, job_view
from ui.widgets.matrix import show
from viz.classroom_figures import labels

MATRICES: tuple[Literal["q", "k", "v"], ...] = ("q", "k", "v")
SHOWN_DIMS = 8
MAX_TOKENS = 512  # the real-model tab reads at most this many tokens of the sidebar prompt


def current_view() -> ClassroomView:
    """The page's view: from the link the first time, then as the visitor changes it."""
    return session.page_view(Classroom.VIEW, "classroom", ClassroomView)


def save(view: ClassroomView) -> ClassroomView:
    keep(Classroom.VIEW, view)
    return view


def _apply(change: Callable[..., ClassroomView], *args: Any) -> None:
    """on_click: replace the view by ``change(view, *args)``."""
    save(change(current_view(), *args))


def _bound(
    key: str, value: Any, change: Callable[[ClassroomView, Any], ClassroomView]
) -> dict[str, Any]:
    return session.bound(Classroom.VIEW, key, value, change)


def tabs(view: ClassroomView) -> dict[cl.Lesson, Any]:
    """The page's tabs (only the open one runs), the open one kept in the view."""
    by_label = {label: tab for tab, label in cl.TAB_LABELS.items()}
    made = st.tabs(
        list(cl.TAB_LABELS.values()),
        **_bound(Classroom.TAB, cl.TAB_LABELS[view.tab], lambda v, x: cl.open_tab(v, by_label[x])),
    )
    return dict(zip(cl.TAB_LABELS, made, strict=True))


def link(view: ClassroomView) -> None:
    """The page's link (the tab, the matrices, the head and its window) in the address bar and
    on the page: a teacher can hand out the example on the screen."""
    components.sync_url(session.page_query(view), key=Classroom.URL)
    st.markdown(f"[Link to this view]({session.page_url(view)})")


def _inputs(view: ClassroomView) -> tuple[str, str, str, bool]:
    b = st.columns([1, 1, 2])
    b[0].button(
        "Example A (2 tokens)",
        on_click=_apply,
        args=(cl.with_example, "A"),
        key=Classroom.EXAMPLE_A,
    )
    b[1].button(
        "Example B (3 tokens)",
        on_click=_apply,
        args=(cl.with_example, "B"),
        key=Classroom.EXAMPLE_B,
    )
    b[2].toggle(
        "Causal mask (hide later keys)", **_bound(Classroom.CAUSAL, view.causal, cl.with_causal)
    )
    st.caption(
        "One row per token: rows separated by `;` or new lines, numbers by commas. "
        f"Up to {steps.MAX_SIZE} × {steps.MAX_SIZE}. Q and K need the same number of "
        "columns (d_k); K and V the same number of rows."
    )
    for col, m in zip(st.columns(3), MATRICES, strict=True):
        typed = getattr(view, m)
        change = functools.partial(_with_matrix, m)
        col.text_area(m.upper(), height=110, **_bound(Classroom.matrix(m), typed, change))
    return view.q, view.k, view.v, view.causal


def _with_matrix(name: Literal["q", "k", "v"], view: ClassroomView, text: str) -> ClassroomView:
    return cl.with_matrix(view, name, text)


def step_by_step(view: ClassroomView) -> None:
    """Editable Q, K, V and every intermediate of scaled dot-product attention."""
    st.subheader("Scaled dot-product attention, one step at a time")
    q_text, k_text, v_text, causal = _inputs(view)
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


def _window_controls(view: ClassroomView, facts: ModelFacts, n_tokens: int) -> ClassroomView:
    """The head and the tokens shown, fitted to this model and prompt; returns the view."""
    view = save(cl.fit(view, facts.n_layers, facts.n_heads, n_tokens))
    most, width = min(cl.SHOWN_TOKENS, n_tokens), view.width or 1
    c = list(st.columns(4))
    c[0].selectbox(
        "Layer", range(facts.n_layers), **_bound(Classroom.LAYER, view.head.layer, cl.with_layer)
    )
    c[1].selectbox(
        "Head", range(facts.n_heads), **_bound(Classroom.HEAD, view.head.index, cl.with_head)
    )
    if most > 1:
        c[2].slider(
            "Tokens shown",
            1,
            most,
            **_bound(Classroom.WIDTH, width, cl.with_width),
        )
    c[3].number_input(
        "First token shown",
        0,
        n_tokens - width,
        **_bound(Classroom.START, view.start, cl.with_start),
    )
    return view


def _report_check(
    check: real.HeadCheck, acts: real.LayerActivations, facts: ModelFacts, head: Head
) -> None:
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
            f"{facts.attention_kind}: query head {head.index} reads key/value head {check.kv_head}."
        )


def layer_activations(
    model: ModelHandle, prompt: str, layer: int
) -> real.LayerActivations | job_view.Pending:
    """One layer's q, k, v, scores, pattern and z on the prompt's first tokens, as a job
    (:data:`ui.widgets.job_view.MISSING` while it runs)."""
    key = LayerKey(session.allowed_spec(model), prompt, layer, MAX_TOKENS)
    return job_view.run_job(
        key,
        f"Reading layer {layer}'s q, k and v from the model",
        lambda progress: real.layer_activations(model, prompt, layer, MAX_TOKENS),
        cost=real.layer_cost(model.facts, real.token_count(model, prompt, MAX_TOKENS)),
    )


def real_model(view: ClassroomView) -> ModelFacts | None:
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
    view = _window_controls(view, facts, n_tokens)
    chosen, start, width = view.head, view.start, view.width or 1
    layer, head = chosen
    try:
        acts = layer_activations(model, prompt, layer)
        if acts is job_view.MISSING:
            return facts
        check = real.head_steps(acts, head)
    except UserError as err:
        session.show_error(err)
        return facts
    _report_check(check, acts, facts, chosen)
    stop = min(start + width, acts.n_tokens)
    toks = [f"({i}) {t}" for i, t in enumerate(acts.tokens)][start:stop]
    s, dims = check.steps, min(SHOWN_DIMS, facts.d_head)
    few = min(4, dims)
    # K and V share Q's rows, so only Q carries the tokens: the three fit a third of a
    # 1,280-px page each with the sidebar open (measured: with every table labelled and three
    # decimals, two of the four columns showed)
    c = list(st.columns([4, 3, 3]))
    for col, name, mat in zip(c, ("Q", "K", "V"), (s.q, s.k, s.v), strict=True):
        with col:
            show(
                mat[start:stop, :few],
                toks if name == "Q" else [""] * len(toks),
                labels("d", few),
                decimals=2,
                title=f"{name} (first {few} of {facts.d_head} dims)"
                if name == "Q"
                else f"{name} (same rows, first {few})",
                compact=True,
            )
    masked = " with the causal mask" if facts.causal else ""
    if acts.window is not None:
        masked += f" and a sliding window of {acts.window}"
        st.caption(
            f"Layer {layer} slides: a query sees only its last {acts.window} keys, itself "
            "included; older keys are masked like later ones."
        )
    textbook = abs(acts.scale - facts.d_head**-0.5) < 1e-9
    scaled = f"Q Kᵀ / √{facts.d_head}" if textbook else f"Q Kᵀ × {acts.scale:.4g}"
    if s.softcap is not None:  # raw, then capped: what the softmax reads
        show(
            real.window(np.where(s.visible, s.scaled, -np.inf), start, stop),
            toks,
            toks,
            decimals=3,
            title=f"{scaled} (raw scaled scores{masked})",
            compact=True,
        )
        scaled = f"{s.softcap:g} · tanh(S / {s.softcap:g})"
        masked = f", capped at ±{s.softcap:g}" + masked
    show(
        real.window(s.logits, start, stop),
        toks,
        toks,
        decimals=3,
        title=f"{scaled} (scaled scores{masked})",
        compact=True,
    )
    rest = real.mass_outside(s.weights, start, stop)
    sink = s.sink_weights
    if sink is not None:
        st.caption(
            f"Head {chosen} has a learned sink (logit {s.sink:+.3f}): one more term of every "
            "row's softmax that is no token. Its weight is in the “sink” column; a row's "
            "weights and its sink sum to 1."
        )
        rest = rest - sink[start:stop]
    c = list(st.columns([5, 1])) if np.any(rest > 1e-6) or sink is not None else [st.container()]
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
            columns = [rest[:, None]] + ([] if sink is None else [sink[start:stop, None]])
            show(
                np.concatenate(columns, axis=1),
                toks,
                ["rest"] + ([] if sink is None else ["sink"]),
                decimals=3,
                title="keys not shown" + ("; the sink" if sink is not None else ""),
                compact=True,
            )
    note = f" (first {dims} of {facts.d_head} dims)" if dims < facts.d_head else ""
    show(
        s.output[start:stop, :dims],
        toks,
        labels("d", dims),
        decimals=3,
        title="A V = z" + note,
        compact=True,
    )
    st.markdown(f"[Open head {chosen} in the explorer]({session.explorer_link(chosen)})")
    st.caption(
        "For teachers: the model's q, k and v already include the projection biases. "
        "The scale is read from the model's own attention layer: GPT-2 and BERT use "
        "1/√d_head exactly as in the formula above; some models fold in another factor."
    )
    return facts


TEXT_SIZES: dict[cl.TextSize, str] = {
    "normal": "Normal text",
    "large": "Large text (projector)",
    "larger": "Larger text (back row)",
}
_SCALE = {"normal": 1.0, "large": 1.25, "larger": 1.5}
ROOT_PX = 16  # the browser's (and Streamlit's) root font size


def projector_options(view: ClassroomView) -> None:
    """Text size for a projector, and a hint to give the tables the sidebar's room."""
    left, right = st.columns([2, 3])
    left.selectbox(
        "Text size",
        list(TEXT_SIZES),
        format_func=TEXT_SIZES.__getitem__,
        help="Larger text for the back of the room.",
        **_bound(Classroom.TEXT_SIZE, view.text_size, cl.with_text_size),
    )
    right.caption(
        "On a projector (1,280 × 720), collapse the sidebar with « at its top: the "
        "matrices get its room. Wide matrices scroll sideways instead of being cut."
    )
    scale = _SCALE[view.text_size]
    if scale != 1.0:  # every text size of the page is in rem: the root's size scales them all
        st.html(f"<style>html {{ font-size: {ROOT_PX * scale:g}px; }}</style>")
