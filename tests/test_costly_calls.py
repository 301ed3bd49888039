"""No page section runs a model-sized computation in the page thread: every call of a costly
core function sits inside the work callable handed to ``run_job`` (a lambda or a function
passed as its ``work``), where the job pool prices it, queues it and lets it be cancelled.
Checked on the source with the AST, and on planted violations so the checker cannot stop
looking unnoticed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ROOT / "ui/sections"

# Core functions whose cost grows with the model or the input: capture, ablation, patching,
# attribution, rollout, spans, word merging, alignment, path patching, generation, eviction,
# sweeps, scores over a corpus, pruning and export.
COSTLY: dict[str, set[str]] = {
    "models.capture.run": {"capture"},
    "models.capture.streaming": {"capture_streaming"},
    "models.capture.rollout": {"rollout_weights"},
    "models.capture.spans": {"span_weights"},
    "models.capture.words": {"merge_pattern", "merge_keys", "merge_queries"},
    "models.capture.alignment": {"align", "matching_blocks"},
    "models.capture.compare": {"align_runs", "head_divergence", "identical_rows"},
    "models.capture.precision": {"pattern_difference"},
    "models.capture.weighted": {"value_norms", "value_weighting"},
    "models.circuits": {
        "baseline",
        "attribution_patching",
        "path_patching",
        "dla_loadings",
        "path_loadings",
        "edge_estimates",
    },
    "models.circuits.patching": {"baseline", "head_effects", "position_effects"},
    "models.circuits.atp": {"attribution_patching"},
    "models.circuits.paths": {"path_patching"},
    "models.circuits.findings": {"attribution_findings", "weight_findings"},
    "models.circuits.why_effects": {"part_effects"},
    "models.circuits.why_keep": {"keep"},
    "models.generate": {"generate", "eviction_sweep"},
    "models.generate.generation": {"generate"},
    "ui.runtime.job_work": {"compute", "streamed_generation", "curve_of"},
    "models.generate.sweep": {"eviction_sweep", "eviction_against_plain", "plain_perplexity"},
    "models.heads.atlas.compute": {"compute_atlas"},
    "models.heads.finding.corpus_scores": {"score_corpus"},
    "models.heads.finding.induction": {"measure_repeated"},
    "models.heads.pruning.export": {"prune_and_export"},
    "models.heads.pruning.ablation": {"ablated_loss", "mask_gradient"},
    "models.heads.pruning.importance": {
        "measure_corpus_importance",
        "pruning_curve",
        "corpus_losses",
        "ablated_losses",
    },
    "models.scaling.capture": {"capture_scores", "next_token_loss", "loss_at", "loss_curve"},
    "models.scaling.maths": {"sweep"},
    "models.classroom.real": {"layer_activations"},
    "models.attention.check": {"check_kernel"},
}

# Page-thread calls whose size a bound other than the prompt's length caps: (file, the
# function that calls) and the bound.
BOUNDED: dict[tuple[str, str], str] = {
    ("explorer_detail.py", "read_units"): "merges the detail window, a fixed number of units",
    ("explorer_detail.py", "sink_column"): "merges the detail window's rows' sink weights",
    ("explorer_detail.py", "whole_csv"): "only offered up to WHOLE_CSV_TOKENS tokens",
    ("explorer_strip.py", "attention_weights"): "one token or one word; spans are a job",
}


def _costly_names(tree: ast.Module) -> tuple[dict[str, str], dict[str, str]]:
    """What the module's imports bind: local function names and local module names that
    reach a costly function (``{local: qualified}``)."""
    functions: dict[str, str] = {}
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        for alias in node.names:
            local = alias.asname or alias.name
            if alias.name in COSTLY.get(node.module, ()):
                functions[local] = f"{node.module}.{alias.name}"
            if f"{node.module}.{alias.name}" in COSTLY:
                modules[local] = f"{node.module}.{alias.name}"
    return functions, modules


def _work_argument(call: ast.Call) -> ast.expr | None:
    """The ``work`` argument of a ``run_job`` call (third positional or keyword)."""
    name = ast.unparse(call.func)
    if name != "run_job" and not name.endswith(".run_job"):
        return None
    for keyword in call.keywords:
        if keyword.arg == "work":
            return keyword.value
    return call.args[2] if len(call.args) > 2 else None


def _work_callables(tree: ast.Module) -> tuple[set[int], set[str]]:
    """Lambdas passed as ``work`` (by node id) and the names passed as ``work``."""
    lambdas: set[int] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or (work := _work_argument(node)) is None:
            continue
        if isinstance(work, ast.Lambda):
            lambdas.add(id(work))
        elif isinstance(work, ast.Name):
            names.add(work.id)
        elif isinstance(work, ast.Call):  # a factory that returns the work: ``x_work(...)``
            names.add(ast.unparse(work.func).rpartition(".")[2])
    return lambdas, names


def outside_work(source: str, bounded: frozenset[str] = frozenset()) -> list[str]:
    """``line: function`` for every costly call not inside a ``run_job`` work callable, nor
    inside one of the ``bounded`` functions.

    Inside means: within a lambda passed as ``work``, or within a function whose name is
    passed as ``work`` or whose call (a factory that returns the work) is."""
    tree = ast.parse(source)
    functions, modules = _costly_names(tree)
    lambdas, work_names = _work_callables(tree)
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node

    def inside_work(node: ast.AST) -> bool:
        chain = []
        while id(node) in parents:
            node = parents[id(node)]
            chain.append(node)
        caller = next((f for f in chain if isinstance(f, ast.FunctionDef)), None)
        if caller is not None and caller.name in bounded:
            return True
        return any(
            (isinstance(up, ast.Lambda) and id(up) in lambdas)
            or (isinstance(up, ast.FunctionDef) and up.name in work_names)
            for up in chain
        )

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = None
        if isinstance(func, ast.Name) and func.id in functions:
            name = functions[func.id]
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in modules
            and func.attr in COSTLY[modules[func.value.id]]
        ):
            name = f"{modules[func.value.id]}.{func.attr}"
        if name and not inside_work(node):
            found.append(f"{node.lineno}: {name}")
    return found


def test_the_checker_sees_a_costly_call_in_the_page_thread():
    planted = (
        "from models.capture.spans import span_weights\n"
        "from models.generate import generate\n"
        "from models.scaling import capture\n"
        "def section(run):\n"
        "    weights = span_weights(run, 'all', 0, 0, slice(0, 9), 'from')\n"
        "    job_view.run_job(key, 'x', lambda p: generate(model, 'a'), cost=c)\n"
        "    capture.loss_at(model)\n"
        "    return weights\n"
    )
    assert outside_work(planted) == [
        "5: models.capture.spans.span_weights",
        "7: models.scaling.capture.loss_at",
    ]


def test_the_checker_accepts_every_shape_of_work():
    planted = (
        "from models.capture.spans import span_weights\n"
        "from models.circuits import baseline\n"
        "def a(key):\n"
        "    job_view.run_job(key, 'x', lambda p: span_weights(run), cost=c)\n"
        "def b(key):\n"
        "    def job(progress):\n"
        "        return baseline(model, setup)\n"
        "    run_job(key, 'x', job, cost=c)\n"
        "def span_work(run):\n"
        "    def work(progress):\n"
        "        return span_weights(run)\n"
        "    return work\n"
        "def c(key):\n"
        "    run_job(key, 'x', work=span_work(run), cost=c)\n"
    )
    assert outside_work(planted) == []


def test_every_costly_call_in_a_section_runs_as_a_job():
    found = {}
    for path in sorted(SECTIONS.glob("*.py")):
        bounded = frozenset(name for (file, name) in BOUNDED if file == path.name)
        if calls := outside_work(path.read_text(encoding="utf-8"), bounded):
            found[path.name] = calls
    assert found == {}


def test_a_bounded_caller_is_only_excused_for_itself():
    planted = (
        "from models.capture.words import merge_pattern\n"
        "def read_units(p, w):\n"
        "    return merge_pattern(p, w)\n"
        "def other(p, w):\n"
        "    return merge_pattern(p, w)\n"
    )
    assert outside_work(planted, frozenset({"read_units"})) == [
        "5: models.capture.words.merge_pattern"
    ]


def test_the_costly_list_names_functions_that_exist():
    import importlib

    for module, names in COSTLY.items():
        loaded = importlib.import_module(module)
        for name in names:
            assert callable(getattr(loaded, name, None)), f"{module}.{name}"
