"""The Circuits page's state as a value: every transition checked directly, without AppTest."""

from dataclasses import replace

import numpy as np
import pytest

from models.circuits.composition import Composition
from models.circuits.cost import PassPlan
from models.circuits.graph import Edge
from models.circuits.task import CircuitTask
from models.cost import Cost
from models.head import Head
from ui.state import circuits as cs
from ui.state import circuits_derived as derived
from ui.state.circuits import OWN, AtPOptions, CircuitsState, PathRequest

IOI = CircuitTask("When Mary and John went", "When Mary and John came", " Mary", " John")
COPY = CircuitTask("a b c a b", "x y z a b", " c", " z")
TASKS = {"Names (IOI)": IOI, "Copying": COPY}


def test_a_new_model_starts_from_its_first_preset_and_keeps_the_tab():
    old = replace(
        CircuitsState(model="m1", preset="Copying", task=COPY),
        tab="weights",
        exact=True,
        graph_head=Head(1, 1),
        asked=frozenset({"atp"}),
    )
    state = cs.for_model(old, "m2", TASKS)
    assert (state.model, state.preset, state.task, state.tab) == (
        "m2",
        "Names (IOI)",
        IOI,
        "weights",
    )
    assert state.exact is None and state.graph_head is None and not state.asked
    assert cs.for_model(state, "m2", TASKS) is state  # same model: unchanged


def test_own_prompts_survive_a_new_model_and_an_encoder_has_no_preset():
    own = CircuitsState(model="m1", preset=OWN, task=COPY)
    assert cs.for_model(own, "m2", TASKS).task == COPY
    encoder = cs.for_model(CircuitsState(model="m1", preset="Copying", task=COPY), "bert", {})
    assert encoder.preset == OWN and encoder.model == "bert"


def test_a_preset_fills_the_task_and_own_keeps_it():
    state = cs.choose_preset(CircuitsState(preset="Names (IOI)", task=IOI), "Copying", TASKS)
    assert (state.preset, state.task) == ("Copying", COPY)
    mine = cs.choose_preset(cs.edit_task(state, "clean", "mine"), OWN, TASKS)
    assert mine.preset == OWN and mine.task.clean == "mine"
    assert cs.choose_preset(state, "no such preset", TASKS).preset == OWN


def test_a_new_task_forgets_what_was_asked_for_the_old_one_but_the_weights():
    state = CircuitsState(task=IOI, asked=frozenset({"atp", "weights", "data"}), threshold=0.3)
    state = cs.ask_path(state, PathRequest(Head(2, 1), "k"))
    edited = cs.edit_task(state, "answer", " John ")
    assert edited.task.answer == " John " and edited.asked == {"weights"}
    assert edited.paths == () and edited.path is None and edited.threshold is None
    assert cs.edit_task(state, "answer", IOI.answer) is state  # the same text: nothing forgotten


def test_putting_the_space_back():
    state = CircuitsState(task=replace(IOI, answer="Mary", wrong="John"))
    assert cs.put_space_back(state, "answer").task.answer == " Mary"
    assert cs.put_space_back(state, "wrong").task.wrong == " John"


def test_cheap_work_runs_by_itself_and_costly_work_waits_to_be_asked():
    state = CircuitsState()
    assert cs.should_run(state, "atp", cs.AUTO_S) and not cs.should_run(state, "atp", 60.0)
    assert cs.should_run(cs.ask(state, "atp"), "atp", 60.0)
    assert cs.exact_on(state, 12) and not cs.exact_on(state, 270)
    assert not cs.exact_on(replace(state, exact=False), 12) and cs.exact_on(
        replace(state, exact=True), 270
    )


def test_edge_estimates_are_on_when_cheap_unless_chosen():
    state = CircuitsState()
    assert cs.atp_options(state, 1.0) == AtPOptions(edges="recomputed")
    assert cs.atp_options(state, 60.0).edges is None
    chosen = replace(state, edges_on=True, edges_mode="direct")
    assert cs.atp_options(chosen, 60.0).edges == "direct"
    assert cs.atp_options(replace(state, edges_on=False), 1.0).edges is None
    assert cs.set_grad_drop(state, True).atp == AtPOptions(grad_drop=True)


def test_extra_cost_is_the_difference():
    base = PassPlan(2.0, 1.0, Cost(overhead_s=1.2, peak_bytes=30 * 2**20))
    more = PassPlan(2.0, 15.5, Cost(overhead_s=7.2, peak_bytes=69 * 2**20))
    assert derived.extra_cost(more, base) == "+14.5 backward passes, about +6 s, +39 MB"
    assert derived.extra_cost(base, base) == "under +0.1 s"
    one_more = PassPlan(3.0, 1.0, Cost(overhead_s=1.5))
    assert derived.extra_cost(one_more, base) == "+1 forward pass, about +0.3 s"


def test_the_default_receiver_is_the_largest_dla_above_layer_0():
    dla = np.array([[9.0, 0.0], [0.5, -3.0], [0.1, 2.0]])
    assert derived.default_receiver(dla) == Head(2, 1)
    state = CircuitsState()
    assert cs.shown_path(state, dla) == PathRequest(Head(2, 1))
    moved = cs.choose_path(state, PathRequest(Head(0, 5), "v"), 3, 2)
    assert moved.path == PathRequest(Head(1, 1), "v")  # layer 0 has no sender; index clamped


def test_path_requests_are_remembered_newest_last_and_bounded():
    state = CircuitsState()
    for i in range(cs.MAX_PATHS + 3):
        state = cs.ask_path(state, PathRequest(Head(1, i)))
    assert len(state.paths) == cs.MAX_PATHS and state.paths[-1].receiver == Head(1, 18)
    again = cs.ask_path(state, PathRequest(Head(1, 5)))
    assert again.paths[-1] == PathRequest(Head(1, 5)) and len(again.paths) == cs.MAX_PATHS
    assert cs.path_wanted(again, PathRequest(Head(1, 5)), 99.0)
    assert not cs.path_wanted(again, PathRequest(Head(1, 5), "k"), 99.0)
    assert cs.path_wanted(again, PathRequest(Head(1, 5), "k"), 1.0)


def test_the_graph_source_falls_back_to_what_is_available():
    state = CircuitsState(threshold=0.2, graph_head=Head(1, 0))
    assert cs.shown_source(state, ["paths", "weights"]) == "paths"
    assert cs.shown_source(state, []) is None
    chosen = cs.choose_source(state, "weights")
    assert chosen.graph_source == "weights" and chosen.threshold is None
    assert chosen.graph_head is None
    assert cs.shown_source(chosen, ["paths", "weights"]) == "weights"


def test_the_default_threshold_shows_about_twenty_edges():
    weights = [(-1) ** i * (i + 1) / 100 for i in range(50)]
    threshold = derived.default_threshold(weights)
    assert sum(abs(w) >= threshold for w in weights) == derived.TOP_EDGES
    assert derived.default_threshold([0.5, -0.2]) == 0.2 and derived.default_threshold([]) == 0.0
    state = CircuitsState(threshold=9.0)
    assert cs.shown_threshold(state, [0.5, -0.7]) == 0.7  # clamped to the largest
    assert cs.shown_threshold(CircuitsState(), [0.5, -0.7]) == 0.5


@pytest.mark.parametrize(
    "label, picked", [("2.1", Head(2, 1)), ("9.1", None), ("x", None), (None, None)]
)
def test_a_clicked_node_is_picked_when_it_is_a_head(label, picked):
    state = CircuitsState(graph_head=None)
    assert cs.pick_node(state, label, 3, 4).graph_head == picked


def test_composition_edges_keep_the_strongest_pairs_of_each_kind():
    q = np.full((4, 4), np.nan)
    q[0, 2], q[0, 3], q[1, 2] = 0.9, 0.1, 0.4
    k = np.where(np.isnan(q), np.nan, 0.05)
    pairs = Composition(n_heads=2, q=q, k=k, v=k)
    graph = derived.composition_graph(pairs, 2, ["q", "v"], keep=2)
    assert [(str(e.sender), str(e.receiver), e.input, e.weight) for e in graph.edges] == [
        ("0.0", "1.0", "q", 0.9),
        ("0.1", "1.0", "q", 0.4),
        ("0.0", "1.0", "v", 0.05),
        ("0.0", "1.1", "v", 0.05),
    ]
    assert derived.default_composition_receiver(pairs, "q") == Head(1, 0)


def test_endings_name_where_the_strongest_edges_end_against_dla():
    dla = np.array([[0.0, 0.1], [3.0, -2.0], [0.5, 1.0]])  # ranks: 1.0, 1.1, 2.1, 2.0, ...
    edges = [
        Edge(Head(0, 0), Head(1, 0), "q", 0.9),
        Edge(Head(0, 1), Head(1, 0), "k", -0.5),
        Edge(Head(1, 1), Head(2, 0), "v", 0.2),
    ]
    said = derived.endings(edges, dla, n_edges=3, n_top=2)
    assert said == (
        "The 3 strongest edges end at 1.0 (DLA rank 1, 2 edges), 2.0 (DLA rank 4, "
        "1 edge); 1 of the 2 heads direct logit attribution ranks highest receive "
        "one."
    )
    assert derived.dla_ranks(dla)[Head(1, 1)] == 2
    assert derived.endings([], dla) == "No edge is above the threshold."


def test_each_choice_has_its_own_typed_transition_and_changes_only_its_field():
    state = CircuitsState(task=IOI, threshold=0.5, composition_receiver=Head(2, 1))
    changed = {
        "tab": cs.choose_tab(state, "atp"),
        "exact": cs.set_exact(state, False),
        "position_head": cs.choose_position_head(state, Head(1, 2)),
        "edges_on": cs.set_edges(state, True),
        "edges_mode": cs.choose_edges_mode(state, "direct"),
        "node": cs.choose_node(state, "k"),
        "atp_head": cs.choose_atp_head(state, Head(0, 3)),
        "graph_head": cs.choose_graph_head(state, Head(2, 2)),
        "weight_score": cs.choose_weight_score(state, "qk_previous"),
        "twin": cs.choose_twin(state, "prev_previous"),
    }
    for field, new in changed.items():
        diff = {f for f in vars(state) if getattr(new, f) != getattr(state, f)}
        assert diff == {field}, field
    assert cs.set_verify_top(state, 5).atp == AtPOptions(verify_top=5)
    assert cs.set_verify_top(state, -2).atp.verify_top == 0
    assert cs.set_qk_fix(state, False).atp == AtPOptions(qk_fix=False)
    assert cs.set_threshold(state, 0.25).threshold == 0.25


def test_new_graph_inputs_or_composition_kind_reset_what_depends_on_them():
    state = CircuitsState(threshold=0.5, composition_receiver=Head(2, 1))
    inputs = cs.choose_graph_inputs(state, ["v", "q"])
    assert inputs.graph_inputs == ("q", "v") and inputs.threshold is None
    kind = cs.choose_composition(state, "k")
    assert kind.composition == "k" and kind.composition_receiver is None
    assert cs.choose_composition_receiver(kind, Head(1, 1)).composition_receiver == Head(1, 1)


def test_a_link_s_choices_stay_when_the_model_is_first_known():
    linked = CircuitsState(preset="Copying", task=COPY, tab="atp", node="k", threshold=0.2)
    state = cs.for_model(linked, "m1", TASKS)
    assert state == replace(linked, model="m1")
    edited = cs.for_model(replace(linked, task=replace(COPY, answer=" d")), "m1", TASKS)
    assert edited.preset == OWN and edited.task.answer == " d"
    named = cs.for_model(CircuitsState(preset="Copying"), "m1", TASKS)
    assert named.task == COPY
    fresh = cs.for_model(CircuitsState(), "m1", TASKS)
    assert (fresh.preset, fresh.task) == ("Names (IOI)", IOI)
    assert cs.for_model(CircuitsState(preset="gone"), "m1", TASKS).preset == "Names (IOI)"
