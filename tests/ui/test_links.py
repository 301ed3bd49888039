"""Links: every field of every page's state travels through a link and comes back the same, and
garbage in a link becomes notes, never an exception."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import parse_qsl, urlencode

import pytest

from models.circuits.task import CircuitTask
from models.generate.settings import MAX_NEW_TOKENS, GenerationSettings
from models.head import Head
from models.heads.table import Thresholds
from ui import links
from ui.links import Shared
from ui.state import generate as gs
from ui.state.atlas import AtlasView
from ui.state.circuits import OWN, AtPOptions, CircuitsState, PathRequest
from ui.state.classroom import ClassroomView
from ui.state.explorer import ExplorerView
from ui.state.generate import EvictionChoice, GenerateState
from ui.state.heads import HeadsView
from ui.state.kernel import KernelView
from ui.state.scaling import ScalingView

LONG = "a passage, twice. " * 200  # 3,600 characters: over the link's limit


class Store:
    """The server's prompt store as the link sees it: a dict."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def keep(self, text: str) -> str:
        pid = f"{len(self.texts):016x}"
        self.texts[pid] = text
        return pid

    def load(self, pid: str) -> str | None:
        return self.texts.get(pid)


EXPLORER = ExplorerView(
    head=Head(18, 7),
    token=2000,
    scope="layer",
    direction="to",
    scale="log",
    colour_range="rest",
    pin_sinks=False,
    weighted=True,
    mode="compare",
    prompt_b="Alice gave Carol a <book> & more",
    words=True,
    span=(12, 21),
    rollout=True,
)
GENERATE = GenerateState(
    settings=GenerationSettings(
        max_new_tokens=40,
        chat=False,
        decoding="sample",
        temperature=0.8,
        top_k=50,
        top_p=0.95,
        seed=7,
    ),
    pending=True,
    step=3,
    head=Head(2, 1),
    eviction=EvictionChoice(
        source="pasted",
        pasted="a pasted text",
        budgets=(64, 128),
        sinks=2,
        policies=("window", "h2o"),
        max_tokens=512,
    ),
)
CIRCUITS = CircuitsState(
    preset=OWN,
    task=CircuitTask("When Mary and John went", "When Mary and John came", " Mary", " John"),
    tab="paths",
    exact=False,
    position_head=Head(1, 2),
    atp=AtPOptions(qk_fix=False, grad_drop=True, verify_top=5),
    edges_on=True,
    edges_mode="direct",
    node="k",
    atp_head=Head(0, 3),
    path=PathRequest(Head(2, 1), "k", "direct"),
    graph_source="paths",
    graph_inputs=("q", "v"),
    threshold=0.125,
    graph_head=Head(2, 2),
    composition="v",
    composition_receiver=Head(2, 0),
    weight_score="qk_previous",
    twin="prev_previous",
)
ATLAS = AtlasView(x="distance", y="sink", colour=None, size="activation", head=Head(3, 1))
SCALING = ScalingView(axis="alpha", low=0.25, high=8.0, points=31, head=Head(1, 2), pick=4, seed=11)
KERNEL = KernelView(dtype="bfloat16", head=Head(2, 3))
CLASSROOM = ClassroomView(
    tab="model",
    text_size="larger",
    q="1, 0; 0, 1; 1, 1",
    k="1, 0;\n0, 1; 1, 1",
    v="<b>9</b>, 8 & 7",
    causal=True,
    head=Head(4, 2),
    start=5,
    width=3,
)
HEADS = HeadsView(
    corpus="prompt",
    texts=12,
    max_tokens=128,
    span=30,
    batch=4,
    seed=9,
    thresholds=Thresholds(0.5, 0.25, 0.2, 0.1, 0.75),
    example_score="previous_token",
    example_head=Head(1, 3),
    ranking="gradient",
    method="mean",
    budget=512,
    ablate=True,
    prune_mode="hand",
    prune_k=5,
    prune_groups=2,
    prune_pick=(Head(0, 1), Head(2, 0)),
    prune_dtype="bfloat16",
)
EVERY_PAGE = [EXPLORER, GENERATE, CIRCUITS, ATLAS, SCALING, KERNEL, HEADS, CLASSROOM]


def through_a_url(shared: Shared, state, store: Store, limit: int = links.MAX_LINK_TEXT):
    """``state`` written into a URL, the URL read back as a browser would send it."""
    url = "./?" + urlencode(links.query(shared, state, store.keep, limit))
    return links.parse(dict(parse_qsl(url.partition("?")[2], keep_blank_values=True)), store.load)


@pytest.mark.parametrize("state", EVERY_PAGE, ids=lambda s: type(s).__name__)
def test_every_field_of_every_page_comes_back_from_its_link(state):
    default = type(state)()
    carried = links.in_link(type(state))
    assert set(carried) | type(state).IN_SESSION == set(vars(default))
    unchanged = [f for f in carried if getattr(state, f) == getattr(default, f)]
    assert not unchanged, f"the example leaves {unchanged} at their defaults"
    shared = Shared(model="smollm2", dtype="bfloat16", prompt="Alice gave Bob a book")
    found = through_a_url(shared, state, Store())
    assert found.shared == shared
    assert getattr(found, links.page_of(state)) == state
    assert not any(found.notes.values())


@pytest.mark.parametrize("state", EVERY_PAGE, ids=lambda s: type(s).__name__)
def test_long_texts_travel_as_stored_ids(state):
    store = Store()
    shared = Shared(model="bundled", prompt=LONG)
    if isinstance(state, ExplorerView):
        state = replace(state, prompt_b=LONG + "B")
    elif isinstance(state, CircuitsState):
        state = replace(state, task=replace(state.task, clean=LONG, corrupted=LONG + "x"))
    elif isinstance(state, GenerateState):
        state = replace(state, eviction=replace(state.eviction, pasted=LONG))
    query = links.query(shared, state, store.keep)
    assert "prompt" not in query and "pid" in query
    assert max(len(v) for v in query.values()) <= links.MAX_LINK_TEXT
    found = through_a_url(shared, state, store)
    assert found.shared == shared and getattr(found, links.page_of(state)) == state


def test_a_small_limit_stores_even_short_prompts_once():
    store = Store()
    query = links.query(Shared(prompt="x" * 300), EXPLORER, store.keep, limit=200)
    assert query["pid"] in store.texts and "prompt" not in query


def test_the_explorer_link_keys_are_the_documented_ones():
    query = links.query(Shared(model="bundled"), EXPLORER, Store().keep)
    assert {k: query[k] for k in ("scale", "range", "weighted", "by", "dir", "span")} == {
        "scale": "log",
        "range": "rest",
        "weighted": "1",
        "by": "layer",
        "dir": "to",
        "span": "12-20",
    }
    assert (query["rollout"], query["dtype"], query["layer"], query["head"]) == (
        "1",
        "float32",
        "18",
        "7",
    )


def test_the_atlas_link_keys_and_its_empty_axes():
    query = links.query(Shared(), ATLAS, Store().keep)
    assert {k: query[k] for k in ("ax", "ay", "ac", "as", "layer", "head")} == {
        "ax": "distance",
        "ay": "sink",
        "ac": "",
        "as": "activation",
        "layer": "3",
        "head": "1",
    }
    plain = links.query(Shared(), AtlasView(), Store().keep)
    assert "layer" not in plain and "head" not in plain and plain["as"] == ""
    assert links.parse(plain, {}.get).atlas == AtlasView()
    assert links.parse({}, {}.get).atlas == AtlasView(
        "entropy", "previous_token", "induction", None, None
    )
    assert links.PAGE_PATHS[links.page_of(ATLAS)] == "atlas"


def test_a_head_needs_both_its_layer_and_index_on_the_atlas():
    assert links.parse({"layer": "2"}, {}.get).atlas.head is None
    found = links.parse({"layer": "x", "head": "1", "ac": "nope"}, {}.get)
    assert found.atlas.head is None and found.atlas.colour == "induction"
    assert len(found.notes["atlas"]) == 2 and "ac='nope'" in found.notes["atlas"][0]


def test_a_stored_text_the_server_lacks_is_a_note():
    found = links.parse({"pid": "0123456789abcdef", "mode": "compare", "bid": "ff"}, {}.get)
    assert found.shared.prompt is None and found.explorer.prompt_b == ""
    assert "0123456789abcdef" in found.notes["sidebar"][0]
    assert "prompt B" in found.notes["explorer"][0]


GARBAGE = {
    "layer": "abc",
    "token": "1e3",
    "scale": "cubic",
    "range": "all of it",
    "weighted": "maybe",
    "by": "model",
    "dir": "sideways",
    "span": "9-3",
    "dtype": "int4",
    "n": "many",
    "decoding": "beam",
    "budgets": "64,x",
    "tab": "nope",
    "exact": "perhaps",
    "receiver": "-1.2",
    "threshold": "nan",
    "inputs": "q,z",
    "ax": "<script>",
    "as": "nope",
}


def test_garbage_becomes_the_default_with_a_note_for_each_value():
    found = links.parse(GARBAGE, {}.get)
    assert found.explorer == ExplorerView()
    assert found.shared == Shared()
    assert found.circuits.tab == "patching" and found.circuits.threshold is None
    assert found.circuits.path is None and found.circuits.graph_inputs == ("q",)
    assert found.generate.settings == GenerateState().settings
    assert found.atlas == AtlasView()
    noted = " ".join(" ".join(n) for n in found.notes.values())
    for key in GARBAGE:
        assert f"{key}=" in noted, key


def settings_of(params: dict[str, str]) -> tuple[GenerationSettings, tuple[str, ...]]:
    found = links.parse(params, {}.get)
    return found.generate.settings, found.notes["generate"]


@pytest.mark.parametrize(
    "settings",
    [
        GenerationSettings(max_new_tokens=32, chat=True),
        GenerationSettings(
            max_new_tokens=7, decoding="sample", temperature=0.8, top_k=50, top_p=0.95, seed=123456
        ),
        GenerationSettings(max_new_tokens=1, decoding="sample", temperature=0.25, seed=0),
    ],
)
def test_the_core_s_own_parameters_open_the_same_generation(settings):
    parsed, notes = settings_of(settings.to_params())
    assert not notes
    assert gs.effective(parsed, True) == gs.effective(settings, True)


def test_garbage_in_the_settings_becomes_notes_and_numbers_fit_the_widgets():
    link = {"n": "99999", "decoding": "sample", "temp": "x", "top_k": "-3", "top_p": "7"}
    settings, notes = settings_of({**link, "seed": "7"})
    assert settings.max_new_tokens == MAX_NEW_TOKENS and settings.sampling
    assert settings.seed == 7 and settings.temperature == 1.0 and settings.top_k is None
    assert settings.top_p == 1.0 and len(notes) == 4
    assert any("99999" in n for n in notes) and any("temp='x'" in n for n in notes)


def test_a_zero_temperature_in_a_link_is_kept_for_the_page_to_refuse():
    settings, notes = settings_of({"decoding": "sample", "temp": "0"})
    assert not notes and settings.temperature == 0.0 and settings.seed == 0
    assert settings.problems()  # the page says why, in the generation's own words


def test_a_generation_link_asks_for_it_and_a_plain_link_does_not():
    link = {"n": "6", "chat": "0", "decoding": "sample", "temp": "0.9", "seed": "3", "go": "1"}
    state = links.parse({**link, "layer": "1", "head": "2"}, {}.get).generate
    assert state.pending and state.head == Head(1, 2)
    assert state.settings.max_new_tokens == 6 and not state.settings.chat
    shown = replace(state, pending=False, request=gs.Request("hi", state.settings))
    assert links.parse(links.query(Shared(), shown, Store().keep), {}.get).generate.pending
    plain = links.parse({"layer": "0"}, {}.get).generate
    assert not plain.pending and plain.request is None
    assert plain.settings == gs.DEFAULT_SETTINGS


def test_the_scaling_and_kernel_link_keys():
    query = links.query(Shared(), SCALING, Store().keep)
    assert {k: query[k] for k in ("sweep", "lo", "hi", "points", "at", "sseed")} == {
        "sweep": "alpha",
        "lo": "0.25",
        "hi": "8.0",
        "points": "31",
        "at": "4",
        "sseed": "11",
    }
    assert (query["layer"], query["head"]) == ("1", "2")
    assert links.PAGE_PATHS[links.page_of(SCALING)] == "scaling"
    query = links.query(Shared(), KERNEL, Store().keep)
    assert (query["kdtype"], query["layer"], query["head"]) == ("bfloat16", "2", "3")
    assert links.PAGE_PATHS[links.page_of(KERNEL)] == "kernel"


def test_garbage_in_a_scaling_or_kernel_link_gives_defaults_and_notes():
    found = links.parse(
        {"sweep": "beta", "lo": "nan", "points": "2", "at": "-1", "kdtype": "int8"}, {}.get
    )
    assert found.scaling == ScalingView()
    assert found.kernel == KernelView()
    assert len(found.notes["scaling"]) == 4 and len(found.notes["kernel"]) == 1


def test_the_classroom_link_keys_and_its_defaults():
    query = links.query(Shared(), CLASSROOM, Store().keep)
    assert {k: query[k] for k in ("ctab", "size", "causal", "layer", "head", "first", "shown")} == {
        "ctab": "model",
        "size": "larger",
        "causal": "1",
        "layer": "4",
        "head": "2",
        "first": "5",
        "shown": "3",
    }
    assert (query["mq"], query["mk"], query["mv"]) == (CLASSROOM.q, CLASSROOM.k, CLASSROOM.v)
    assert links.PAGE_PATHS[links.page_of(CLASSROOM)] == "classroom"
    assert links.parse({}, Store().load).classroom == ClassroomView()  # worked example A
    assert "shown" not in links.query(Shared(), ClassroomView(), Store().keep)


def test_garbage_in_a_classroom_link_gives_defaults_and_notes():
    bad = {"ctab": "lunch", "size": "huge", "causal": "maybe", "first": "-2", "shown": "0"}
    link = links.parse(bad, Store().load)
    assert link.classroom == ClassroomView()
    assert len(link.notes["classroom"]) == len(bad)
