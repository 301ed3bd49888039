"""Circuits page sections: the task, activation patching, direct logit attribution, the table
(layout only; the maths is in models.circuits). The task lives in the page's state
(:class:`ui.state.circuits.CircuitsState`); its widgets only display it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import streamlit as st

from models.circuits import (
    Baseline,
    CircuitTask,
    Setup,
    baseline,
    circuit_table,
    prepare,
    table_csv,
)
from models.circuits.cost import baseline_cost, exact_cost
from models.circuits.patching import head_effects, position_effects
from models.circuits.task import CircuitsUnavailable, check_model, missing_space, visible
from models.cost import Cost, with_slack
from models.errors import UserError
from models.head import Head, all_heads
from models.model.handle import ModelHandle
from ui import session
from ui.keys import Circuits
from ui.runtime.job_keys import CircuitKey, HeadPatchKey, PositionPatchKey
from ui.sections import circuits_loadings as loadings
from ui.sections.circuits_session import Ready, apply, bound, preset_tasks
from ui.state import circuits as cs
from ui.state.circuits import OWN, CircuitsState
from ui.text import md
from ui.widgets import job_view
from viz.circuits_figures import head_grid, parts_bars, position_bars

TOKEN_HELP = (
    "One token, as the model writes it: a word after another word starts with a space "
    "(' Mary', shown ␣Mary), and 'Mary' without it is another token."
)


def task_inputs(model: ModelHandle, state: CircuitsState) -> CircuitTask:
    """Preset picker and the four inputs, shown from the state; a preset fills them in."""
    tasks = preset_tasks(model)
    options = [*tasks, OWN]
    task = state.task
    top = st.columns([2, 1, 1])
    top[0].selectbox(
        "Task",
        options,
        help="A ready-made task fills in the prompts and tokens below; edit them freely.",
        **bound(
            Circuits.PRESET,
            state.preset if state.preset in options else OWN,
            lambda s, name: cs.choose_preset(s, name, tasks),
        ),
    )
    top[1].text_input(
        "Answer token (the clean prompt's next token)",
        help=TOKEN_HELP,
        **bound(Circuits.ANSWER, task.answer, lambda s, text: cs.edit_task(s, "answer", text)),
    )
    top[2].text_input(
        "Wrong token (compared with it)",
        help=TOKEN_HELP,
        **bound(Circuits.WRONG, task.wrong, lambda s, text: cs.edit_task(s, "wrong", text)),
    )
    left, right = st.columns(2)
    left.text_area(
        "Clean prompt",
        height=90,
        **bound(Circuits.CLEAN, task.clean, lambda s, text: cs.edit_task(s, "clean", text)),
    )
    right.text_area(
        "Corrupted prompt (same number of tokens)",
        height=90,
        **bound(
            Circuits.CORRUPTED, task.corrupted, lambda s, text: cs.edit_task(s, "corrupted", text)
        ),
    )
    space_check(model, task)
    return task


def space_check(model: ModelHandle, task: CircuitTask) -> None:
    """Say loudly when a typed token lacks the leading space the model almost surely means,
    with a button that puts it back (issue: 'Mary' instead of ' Mary' flips LD)."""
    for field, role, key in (
        ("answer", "answer", Circuits.FIX_ANSWER),
        ("wrong", "wrong token", Circuits.FIX_WRONG),
    ):
        text = getattr(task, field)
        spaced = missing_space(model, text, task.clean)
        if spaced is None:
            continue
        st.warning(
            f"The {role} **{md(visible(text))}** has no leading space. After "
            f"“…{md(task.clean[-12:])}” the model writes the next word with its space, "
            f"**{md(visible(spaced))}** (one token); **{md(visible(text))}** is another "
            "token that it rarely predicts there, so the logit difference would compare "
            "the wrong pair. (␣ marks a space.)"
        )
        st.button(
            f"Use {visible(spaced)} (put the space back)",
            key=key,
            type="primary",
            on_click=apply,
            args=(cs.put_space_back, field),
        )


def token_check(setup: Setup) -> None:
    """Say how the prompts line up and which tokens are compared (␣ marks a space)."""
    differ = [
        i
        for i, (a, b) in enumerate(zip(setup.tokens, setup.corrupted_tokens, strict=True))
        if a != b
    ]
    shown = md(
        ", ".join(f"{i}: {setup.tokens[i]} → {setup.corrupted_tokens[i]}" for i in differ[:6])
        + (" …" if len(differ) > 6 else "")
    )
    st.caption(
        f"Both prompts are **{setup.n_tokens} tokens**; they differ at "
        f"{len(differ)} position{'s' if len(differ) != 1 else ''} ({shown}). LD = "
        f"logit(**{md(setup.answer_label)}**) − logit(**{md(setup.wrong_label)}**) "
        "at the last position (␣ marks a space)."
    )
    for note in setup.notes:
        st.warning(md(note))


def task(model: ModelHandle, state: CircuitsState) -> Ready | UserError | None:
    """The task's inputs, checks and clean/corrupted runs: a :class:`Ready` task, the problem
    that stops one (already shown, or for an encoder to be shown in each tab), or None while
    the runs are still going."""
    try:
        check_model(model)
    except UserError as err:
        return err
    typed = task_inputs(model, state)
    try:
        setup = prepare(model, typed)
        key = circuit_key(model, typed)
        token_check(setup)
        base = job_view.run_job(
            key,
            "Running the clean and corrupted prompts",
            lambda progress: baseline(model, setup, progress=progress),
            cost=baseline_cost(model, setup.n_tokens).cost,
            scale=job_view.Scale(
                lambda n: baseline_cost(model, n).cost, setup.n_tokens, "tokens in each prompt"
            ),
        )
    except UserError as err:
        session.show_error(err)
        return err
    if base is job_view.MISSING:
        return None
    baseline_metrics(base)
    return Ready(typed, setup, key, base)


def circuit_key(model: ModelHandle, task: CircuitTask) -> CircuitKey:
    return CircuitKey(session.allowed_spec(model), task)


def baseline_metrics(base: Baseline) -> None:
    c = st.columns(3)
    c[0].metric("Clean LD", f"{base.ld_clean:.3f}")
    c[1].metric("Corrupted LD", f"{base.ld_corrupted:.3f}")
    c[2].metric("Gap a patch can restore", f"{base.ld_clean - base.ld_corrupted:.3f}")


def _passes(n: int, batch: int) -> str:
    passes = -(-n // batch)
    return f"{passes} batched pass{'es' if passes != 1 else ''} of up to {batch}"


def exact_cost_text(model: ModelHandle, base: Baseline) -> str:
    n = model.facts.n_total_heads
    return (
        f"{n} heads in {_passes(n, base.batch)}, about {max(1, round(base.estimate_s(n)))} s "
        f"on this machine (one pass of {base.batch} copies took "
        f"{base.seconds_per_pass:.2f} s)"
    )


def exact_toggle(model: ModelHandle, state: CircuitsState, label: str, key: str) -> bool:
    """The switch for exact patching of every head (one choice, shown wherever it is asked)."""
    n = model.facts.n_total_heads
    return st.toggle(label, **bound(key, cs.exact_on(state, n), cs.set_exact))


def measured_cost(model: ModelHandle, ready: Ready, n_runs: int) -> Cost:
    """``n_runs`` patched runs: time from the baseline's timed pass; memory as counted, with
    :func:`models.cost.with_slack` (a batch fills its budget, so the copies counted come close
    to the measured peak: 465 to 477 MiB against 497 at 64 SmolLM2 tokens)."""
    estimate = exact_cost(model, ready.setup.n_tokens, n_runs, ready.base.batch).cost
    return replace(
        estimate,
        flops=0.0,
        overhead_s=ready.base.estimate_s(n_runs),
        peak_bytes=with_slack(estimate.peak_bytes),
    )


def exact_effects(model: ModelHandle, ready: Ready) -> np.ndarray | None:
    """Every head's exact patch effect (a job), or None while it runs."""
    n, base = model.facts.n_total_heads, ready.base
    effects = job_view.run_job(
        HeadPatchKey(ready.key),
        f"Patching {n} heads",
        lambda p: head_effects(model, ready.setup, base, progress=p),
        cost=measured_cost(model, ready, n),
    )
    return None if effects is job_view.MISSING else effects


def patching(model: ModelHandle, ready: Ready, state: CircuitsState) -> np.ndarray | None:
    """The per-head patching heatmap, or None while it runs or is switched off."""
    st.subheader("Activation patching, head by head")
    st.caption(
        f"Each head's output (hook_z, every position) is taken from the clean run into "
        f"the corrupted run: {exact_cost_text(model, ready.base)}. Effect "
        "(LD_patched − LD_corrupted) / (LD_clean − LD_corrupted): 0 nothing, 1 the head "
        "alone restores the clean answer."
    )
    if not exact_toggle(model, state, "Patch every head", Circuits.PATCH):
        return None
    effects = exact_effects(model, ready)
    if effects is not None:
        st.plotly_chart(
            head_grid(effects, title="Patch effect per head", value_name="patch effect", floor=1.0),
            width="stretch",
        )
    return effects


def positions(
    model: ModelHandle, ready: Ready, state: CircuitsState, effects: np.ndarray | None
) -> None:
    st.subheader("Which positions carry one head's effect")
    heads = list(all_heads(model.facts.n_layers, model.facts.n_heads))
    head = state.position_head
    if head not in heads:
        head = heads[int(np.nanargmax(effects)) if effects is not None else 0]
    head = st.selectbox(
        "Head",
        heads,
        format_func=str,
        **bound(Circuits.HEAD, head, cs.choose_position_head),
    )
    setup, base = ready.setup, ready.base
    n = setup.n_tokens
    st.caption(
        f"{n} patched runs (one per position) in {_passes(n, base.batch)}, about "
        f"{max(1, round(base.estimate_s(n)))} s."
    )
    found = job_view.run_job(
        PositionPatchKey(ready.key, head),
        f"Patching {head} at {n} positions",
        lambda p: position_effects(model, setup, base, head.layer, head.index, progress=p),
        cost=measured_cost(model, ready, n),
    )
    if found is job_view.MISSING:
        return
    differs = [a != b for a, b in zip(setup.tokens, setup.corrupted_tokens, strict=True)]
    st.plotly_chart(
        position_bars(
            found,
            setup.tokens,
            differs=differs,
            title=f"Patch effect of {head} at each single position",
        ),
        width="stretch",
    )
    st.markdown(
        f"[Open {head} in the explorer on the clean prompt ↗]"
        f"({session.explorer_link(head, prompt=ready.task.clean)})"
    )


def patching_tab(model: ModelHandle, ready: Ready, state: CircuitsState) -> None:
    """Exact patching, one head position by position, direct attribution, the table."""
    effects = None
    try:
        effects = patching(model, ready, state)
        if effects is not None:
            positions(model, ready, state, effects)
    except UserError as err:
        session.show_error(err)
    attribution(ready.base)
    loadings.dla_section(model, ready)
    head_table(model, ready.task, ready.base, effects)
    compare_link(ready.task)


def attribution(base: Baseline) -> None:
    st.subheader("Direct logit attribution (clean run, last position)")
    dla = base.attribution
    st.caption(
        f"Each part of the final residual, divided by the final {dla.norm_kind}'s scale "
        f"from the clean run ({dla.scale:.4g}), pushed through the norm's weight and "
        "W_U[:, answer] − W_U[:, wrong]. The parts are in logits: they add up to LD."
    )
    ok = abs(dla.total - dla.logit_diff) <= 1e-3 * max(1.0, abs(dla.logit_diff))
    (st.success if ok else st.warning)(
        f"Parts add up to LD: {dla.total:.6f} vs {dla.logit_diff:.6f} "
        f"(difference {dla.total - dla.logit_diff:.2e})"
        + (
            ""
            if ok
            else ": this model's residual is not the plain sum of these parts, so "
            "read the shares with care."
        )
    )
    left, right = st.columns(2)
    left.plotly_chart(
        head_grid(dla.heads, title="Direct effect of each head on LD", value_name="DLA"),
        width="stretch",
    )
    right.plotly_chart(
        parts_bars(dla.parts(), title="All parts (heads summed per layer)"), width="stretch"
    )


def head_table(
    model: ModelHandle, task: CircuitTask, base: Baseline, effects: np.ndarray | None
) -> None:
    st.subheader("All heads")
    table = circuit_table(effects, base.attribution.heads)
    table["open"] = [
        session.explorer_link(Head(int(layer), int(h)), prompt=task.clean)
        for layer, h in zip(table["layer"], table["head"], strict=True)
    ]
    if effects is not None:
        # strongest first either way: a head that hurts the task matters as much as one that helps
        table = table.sort_values("patch_effect", key=np.abs, ascending=False, kind="stable")
        shown = ["L.H", "open", "patch_effect", "dla"]
    else:  # patching has not run: strongest direct effect first, no empty column
        table = table.sort_values("dla", key=np.abs, ascending=False, kind="stable")
        shown = ["L.H", "open", "dla"]
        st.caption("Sorted by |DLA|; run patching above to add each head's patch effect.")
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_order=shown,
        column_config={
            "open": st.column_config.LinkColumn(
                "explorer",
                display_text="open ↗",
                help="The explorer on this head with the clean prompt",
            ),
            "patch_effect": st.column_config.NumberColumn("patch effect", format="%.4f"),
            "dla": st.column_config.NumberColumn("DLA", format="%.4f"),
        },
    )
    st.download_button(
        "Download the table (CSV)",
        table_csv(table.drop(columns="open")),
        file_name="circuit_heads.csv",
        mime="text/csv",
    )


def compare_link(task: CircuitTask) -> None:
    """A link to the explorer comparing the clean prompt (A) with the corrupted one (B)."""
    from ui.sections.explorer_session import compare_link as explorer_compare

    st.markdown(
        f"[Compare these two prompts in the explorer ↗]"
        f"({explorer_compare(task.clean, task.corrupted)})",
        help="Every head ranked by how far its attention moved between the clean and "
        "the corrupted prompt, with A, B and A − B for each head.",
    )


def ready_or_say(found: Ready | UserError | None) -> Ready | None:
    """``found`` when the task is ready; else say why in this tab and return None."""
    if isinstance(found, Ready):
        return found
    if isinstance(found, CircuitsUnavailable):
        session.show_error(found)
        st.caption("What the weights say (the last tab) needs no prompt and works on any model.")
    elif isinstance(found, UserError):
        st.info("Fix the task above first: the message under it says what is wrong.")
    else:
        st.info("Waiting for the clean and corrupted runs (above).")
    return None
