"""Sections of the circuits page (UI only; the maths is in models.circuits)."""

from __future__ import annotations

import numpy as np
import streamlit as st

import app_state
from models.circuits import Baseline, CircuitTask, Setup, circuit_table, table_csv
from models.circuits.patching import head_effects, position_effects
from ui import caches, job_view
from ui.text import md
from viz.circuits_figures import head_grid, parts_bars, position_bars

OWN = "Your own prompts"
FIELDS = {"clean": "circuits_clean", "corrupted": "circuits_corrupted",
          "answer": "circuits_answer", "wrong": "circuits_wrong"}
K_PRESET, K_FILLED, K_PATCH, K_HEAD = ("circuits_preset", "circuits_filled",
                                       "circuits_patch", "circuits_head")


def fill(tasks: dict[str, CircuitTask]) -> None:
    """Copy the chosen preset into the four inputs (a widget callback)."""
    task = tasks.get(st.session_state.get(K_PRESET))
    if task is not None:
        for field, key in FIELDS.items():
            st.session_state[key] = getattr(task, field)


def task_inputs(model) -> CircuitTask:
    """Preset picker and the four inputs; a preset is filled in again for a new model."""
    tasks = caches.circuit_presets(model.spec)
    options = list(tasks) + [OWN]
    if st.session_state.get(K_PRESET) not in options:
        st.session_state[K_PRESET] = options[0]
    if st.session_state.get(K_FILLED) != model.spec:
        st.session_state.pop(K_PATCH, None)  # a new model starts with its own default
        if st.session_state[K_PRESET] != OWN:
            fill(tasks)
    st.session_state[K_FILLED] = model.spec
    st.selectbox("Task", options, key=K_PRESET, on_change=fill, args=(tasks,),
                 help="A ready-made task fills in the prompts and tokens below; edit them "
                      "freely.")
    left, right = st.columns(2)
    left.text_area("Clean prompt", key=FIELDS["clean"], height=110)
    right.text_area("Corrupted prompt (same number of tokens)", key=FIELDS["corrupted"],
                    height=110)
    left.text_input("Answer token (the clean prompt's next token)", key=FIELDS["answer"])
    right.text_input("Wrong token (compared with it)", key=FIELDS["wrong"])
    return CircuitTask(*(st.session_state.get(key, "") for key in FIELDS.values()))


def token_check(setup: Setup) -> None:
    """Say how the prompts line up and which tokens are compared."""
    differ = [i for i, (a, b) in enumerate(zip(setup.tokens, setup.corrupted_tokens)) if a != b]
    shown = md(", ".join(f"{i}: {setup.tokens[i]!r} → {setup.corrupted_tokens[i]!r}"
                         for i in differ[:6]) + (" …" if len(differ) > 6 else ""))
    st.caption(f"Both prompts are **{setup.n_tokens} tokens**; they differ at "
               f"{len(differ)} position{'s' if len(differ) != 1 else ''} ({shown}). LD = "
               f"logit({md(repr(setup.answer_label))}) − logit({md(repr(setup.wrong_label))}) "
               "at the last "
               "position.")
    for note in setup.notes:
        st.info(md(note))


def link(model, prompt: str, layer: int, head: int) -> str:
    """Relative URL of the explorer on ``layer.head`` with ``prompt`` (long ones by their id)."""
    return app_state.explorer_link(layer, head, prompt=prompt)


def baseline_metrics(base: Baseline) -> None:
    c = st.columns(3)
    c[0].metric("Clean LD", f"{base.ld_clean:.3f}")
    c[1].metric("Corrupted LD", f"{base.ld_corrupted:.3f}")
    c[2].metric("Gap a patch can restore", f"{base.ld_clean - base.ld_corrupted:.3f}")


def patching(model, setup: Setup, task: CircuitTask, base: Baseline):
    """The per-head patching heatmap, or None while it runs or is switched off."""
    st.subheader("Activation patching, head by head")
    n = model.facts.n_total_heads
    passes = -(-n // base.batch)
    st.caption(f"Each head's output (hook_z, every position) is taken from the clean run into "
               f"the corrupted run: {n} heads in {passes} batched pass"
               f"{'es' if passes > 1 else ''} of up to {base.batch}, about "
               f"{max(1, round(base.estimate_s(n)))} s on this machine (one pass of "
               f"{base.batch} copies took {base.seconds_per_pass:.2f} s). Effect "
               "(LD_patched − LD_corrupted) / (LD_clean − LD_corrupted): 0 nothing, 1 the head "
               "alone restores the clean answer.")
    st.session_state.setdefault(K_PATCH, n <= 48)
    if not st.toggle("Patch every head", key=K_PATCH):
        return None
    effects = job_view.run_job(("circuits_heads", model.spec, task), f"Patching {n} heads",
                               lambda p: head_effects(model, setup, base, progress=p),
                               estimate_s=base.estimate_s(n))
    if effects is job_view.MISSING:
        return None
    st.plotly_chart(head_grid(effects, title="Patch effect per head", value_name="patch effect",
                              floor=1.0), width="stretch")
    return effects


def positions(model, setup: Setup, task: CircuitTask, base: Baseline, effects) -> None:
    st.subheader("Which positions carry one head's effect")
    heads = [f"{l}.{h}" for l in range(model.facts.n_layers) for h in range(model.facts.n_heads)]
    if st.session_state.get(K_HEAD) not in heads:
        best = int(np.nanargmax(effects)) if effects is not None else 0
        st.session_state[K_HEAD] = heads[best]
    name = st.selectbox("Head", heads, key=K_HEAD)
    layer, head = (int(x) for x in name.split("."))
    n = setup.n_tokens
    st.caption(f"{n} patched runs (one per position) in {-(-n // base.batch)} batched "
               f"pass(es), about {max(1, round(base.estimate_s(n)))} s.")
    found = job_view.run_job(("circuits_positions", model.spec, task, layer, head),
                             f"Patching {name} at {n} positions",
                             lambda p: position_effects(model, setup, base, layer, head,
                                                        progress=p),
                             estimate_s=base.estimate_s(n))
    if found is job_view.MISSING:
        return
    differs = [a != b for a, b in zip(setup.tokens, setup.corrupted_tokens)]
    st.plotly_chart(position_bars(found, setup.tokens, differs=differs,
                                  title=f"Patch effect of {name} at each single position"),
                    width="stretch")
    st.markdown(f"[Open {name} in the explorer on the clean prompt ↗]"
                f"({link(model, task.clean, layer, head)})")


def attribution(base: Baseline) -> None:
    st.subheader("Direct logit attribution (clean run, last position)")
    dla = base.attribution
    st.caption(f"Each part of the final residual, divided by the final {dla.norm_kind}'s scale "
               f"from the clean run ({dla.scale:.4g}), pushed through the norm's weight and "
               "W_U[:, answer] − W_U[:, wrong].")
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


def head_table(model, task: CircuitTask, base: Baseline, effects) -> None:
    st.subheader("All heads")
    table = circuit_table(effects, base.attribution.heads)
    table["open"] = [link(model, task.clean, int(l), int(h))
                     for l, h in zip(table["layer"], table["head"])]
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
