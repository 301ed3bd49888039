"""Circuits page sections: the task, activation patching, direct logit attribution, the table
(layout only; the maths is in models.circuits)."""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

from models.circuits import Baseline, CircuitTask, Setup, circuit_table, table_csv
from models.circuits.patching import head_effects, position_effects
from models.circuits.presets import presets
from models.head import Head, all_heads
from models.model.loading import LoadedModel
from ui import session
from ui.keys import Circuits
from ui.runtime import server
from ui.runtime.job_keys import CircuitKey, HeadPatchKey, PositionPatchKey, PresetsKey
from ui.runtime.jobs import Cost
from ui.text import md
from ui.widgets import job_view
from viz.circuits_figures import head_grid, parts_bars, position_bars

OWN = "Your own prompts"
FIELDS = {"clean": Circuits.CLEAN, "corrupted": Circuits.CORRUPTED,
          "answer": Circuits.ANSWER, "wrong": Circuits.WRONG}


def fill(tasks: dict[str, CircuitTask]) -> None:
    """Copy the chosen preset into the four inputs (a widget callback)."""
    task = tasks.get(st.session_state.get(Circuits.PRESET))
    if task is not None:
        for field, key in FIELDS.items():
            st.session_state[key] = getattr(task, field)


def task_inputs(model: LoadedModel) -> CircuitTask:
    """Preset picker and the four inputs; a preset is filled in again for a new model."""
    spec = session.model_spec(model)
    tasks = server.current().derived.get_or_compute(PresetsKey(spec), lambda: presets(model))
    options = list(tasks) + [OWN]
    ss = st.session_state
    if ss.get(Circuits.PRESET) not in options:
        ss[Circuits.PRESET] = options[0]
    if ss.get(Circuits.FILLED) != spec:
        ss.pop(Circuits.PATCH, None)  # a new model starts with its own default
        if ss[Circuits.PRESET] != OWN:
            fill(tasks)
    ss[Circuits.FILLED] = spec
    st.selectbox("Task", options, key=Circuits.PRESET, on_change=fill, args=(tasks,),
                 help="A ready-made task fills in the prompts and tokens below; edit them "
                      "freely.")
    left, right = st.columns(2)
    left.text_area("Clean prompt", key=Circuits.CLEAN, height=110)
    right.text_area("Corrupted prompt (same number of tokens)", key=Circuits.CORRUPTED,
                    height=110)
    left.text_input("Answer token (the clean prompt's next token)", key=Circuits.ANSWER)
    right.text_input("Wrong token (compared with it)", key=Circuits.WRONG)
    return CircuitTask(*(str(ss.get(key, "")) for key in FIELDS.values()))


def token_check(setup: Setup) -> None:
    """Say how the prompts line up and which tokens are compared."""
    differ = [i for i, (a, b) in enumerate(zip(setup.tokens, setup.corrupted_tokens)) if a != b]
    shown = md(", ".join(f"{i}: {setup.tokens[i]!r} → {setup.corrupted_tokens[i]!r}"
                         for i in differ[:6]) + (" …" if len(differ) > 6 else ""))
    st.caption(f"Both prompts are **{setup.n_tokens} tokens**; they differ at "
               f"{len(differ)} position{'s' if len(differ) != 1 else ''} ({shown}). LD = "
               f"logit({md(repr(setup.answer_label))}) − logit({md(repr(setup.wrong_label))}) "
               "at the last position.")
    for note in setup.notes:
        st.warning(md(note))


def circuit_key(model: LoadedModel, task: CircuitTask) -> CircuitKey:
    return CircuitKey(session.model_spec(model), task)


def baseline_metrics(base: Baseline) -> None:
    c = st.columns(3)
    c[0].metric("Clean LD", f"{base.ld_clean:.3f}")
    c[1].metric("Corrupted LD", f"{base.ld_corrupted:.3f}")
    c[2].metric("Gap a patch can restore", f"{base.ld_clean - base.ld_corrupted:.3f}")


def _passes(n: int, batch: int) -> str:
    passes = -(-n // batch)
    return f"{passes} batched pass{'es' if passes != 1 else ''} of up to {batch}"


def patching(model: LoadedModel, setup: Setup, key: CircuitKey, base: Baseline) -> Any:
    """The per-head patching heatmap, or None while it runs or is switched off."""
    st.subheader("Activation patching, head by head")
    n = model.facts.n_total_heads
    st.caption(f"Each head's output (hook_z, every position) is taken from the clean run into "
               f"the corrupted run: {n} heads in {_passes(n, base.batch)}, about "
               f"{max(1, round(base.estimate_s(n)))} s on this machine (one pass of "
               f"{base.batch} copies took {base.seconds_per_pass:.2f} s). Effect "
               "(LD_patched − LD_corrupted) / (LD_clean − LD_corrupted): 0 nothing, 1 the head "
               "alone restores the clean answer.")
    st.session_state.setdefault(Circuits.PATCH, n <= 48)
    if not st.toggle("Patch every head", key=Circuits.PATCH):
        return None
    effects = job_view.run_job(HeadPatchKey(key), f"Patching {n} heads",
                               lambda p: head_effects(model, setup, base, progress=p),
                               cost=Cost(seconds=base.estimate_s(n)))
    if effects is job_view.MISSING:
        return None
    st.plotly_chart(head_grid(effects, title="Patch effect per head", value_name="patch effect",
                              floor=1.0), width="stretch")
    return effects


def positions(model: LoadedModel, setup: Setup, key: CircuitKey, base: Baseline,
              effects: Any) -> None:
    st.subheader("Which positions carry one head's effect")
    heads = list(all_heads(model.facts.n_layers, model.facts.n_heads))
    if st.session_state.get(Circuits.HEAD) not in heads:
        best = int(np.nanargmax(effects)) if effects is not None else 0
        st.session_state[Circuits.HEAD] = heads[best]
    head = st.selectbox("Head", heads, key=Circuits.HEAD, format_func=str)
    n = setup.n_tokens
    st.caption(f"{n} patched runs (one per position) in {_passes(n, base.batch)}, about "
               f"{max(1, round(base.estimate_s(n)))} s.")
    found = job_view.run_job(PositionPatchKey(key, head), f"Patching {head} at {n} positions",
                             lambda p: position_effects(model, setup, base, head.layer,
                                                        head.index, progress=p),
                             cost=Cost(seconds=base.estimate_s(n)))
    if found is job_view.MISSING:
        return
    clean = key.task.clean
    differs = [a != b for a, b in zip(setup.tokens, setup.corrupted_tokens)]
    st.plotly_chart(position_bars(found, setup.tokens, differs=differs,
                                  title=f"Patch effect of {head} at each single position"),
                    width="stretch")
    st.markdown(f"[Open {head} in the explorer on the clean prompt ↗]"
                f"({session.explorer_link(head, prompt=clean)})")


def attribution(base: Baseline) -> None:
    st.subheader("Direct logit attribution (clean run, last position)")
    dla = base.attribution
    st.caption(f"Each part of the final residual, divided by the final {dla.norm_kind}'s scale "
               f"from the clean run ({dla.scale:.4g}), pushed through the norm's weight and "
               "W_U[:, answer] − W_U[:, wrong]. The parts are in logits: they add up to LD.")
    ok = abs(dla.total - dla.logit_diff) <= 1e-3 * max(1.0, abs(dla.logit_diff))
    (st.success if ok else st.warning)(
        f"Parts add up to LD: {dla.total:.6f} vs {dla.logit_diff:.6f} "
        f"(difference {dla.total - dla.logit_diff:.2e})"
        + ("" if ok else ": this model's residual is not the plain sum of these parts, so "
                         "read the shares with care."))
    left, right = st.columns(2)
    left.plotly_chart(head_grid(dla.heads, title="Direct effect of each head on LD",
                                value_name="DLA"), width="stretch")
    right.plotly_chart(parts_bars(dla.parts(), title="All parts (heads summed per layer)"),
                       width="stretch")


def head_table(model: LoadedModel, task: CircuitTask, base: Baseline, effects: Any) -> None:
    st.subheader("All heads")
    table = circuit_table(effects, base.attribution.heads)
    table["open"] = [session.explorer_link(Head(int(layer), int(h)), prompt=task.clean)
                     for layer, h in zip(table["layer"], table["head"])]
    if effects is not None:
        table = table.sort_values("patch_effect", ascending=False, kind="stable")
    st.dataframe(table, hide_index=True, width="stretch",
                 column_order=["L.H", "open", "patch_effect", "dla"],
                 column_config={"open": st.column_config.LinkColumn(
                     "explorer", display_text="open ↗",
                     help="The explorer on this head with the clean prompt"),
                     "patch_effect": st.column_config.NumberColumn("patch effect",
                                                                   format="%.4f"),
                     "dla": st.column_config.NumberColumn("DLA", format="%.4f")})
    st.download_button("Download the table (CSV)", table_csv(table.drop(columns="open")),
                       file_name="circuit_heads.csv", mime="text/csv")


def compare_link(task: CircuitTask) -> None:
    """A link to the explorer comparing the clean prompt (A) with the corrupted one (B)."""
    from ui.sections.explorer_session import compare_link as explorer_compare

    st.markdown(f"[Compare these two prompts in the explorer ↗]"
                f"({explorer_compare(task.clean, task.corrupted)})",
                help="Every head ranked by how far its attention moved between the clean and "
                     "the corrupted prompt, with A, B and A − B for each head.")
