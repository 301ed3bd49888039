"""The head finder's vocabulary: each column described once, and package docstrings that list
exactly the modules each package holds."""

import ast
import re
from pathlib import Path
from typing import get_args

from models.heads import names

ROOT = Path(__file__).resolve().parents[2]
HEADS = ROOT / "models" / "heads"


def repeated_keys(source: str) -> list[str]:
    """String keys written twice in one dict literal, anywhere in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            found += sorted({k for k in keys if keys.count(k) > 1})
    return found


def test_the_duplicate_check_sees_a_planted_duplicate():
    assert repeated_keys('X = {"a": 1, "b": 2, "a": 3}') == ["a"]
    assert repeated_keys('X = {"a": 1, **{"a": 2}}') == []


def test_no_column_is_described_twice():
    source = (HEADS / "names.py").read_text(encoding="utf-8")
    assert repeated_keys(source) == []
    written_later = r"COLUMN_(LABELS|HELP)(\[[^\]]*\]\s*=[^=]|\.update\()"
    assert re.search(written_later, 'COLUMN_HELP["x"] = "y"')  # the check has teeth
    assert not re.search(written_later, source)  # built in one phase


def test_every_column_has_a_header_and_help():
    columns = (
        names.CORE_COLUMNS
        + names.ABLATION_COLUMNS
        + names.EXTRA_COLUMNS
        + [base + suffix for base in names.SPREAD_BASES for suffix in names.SPREAD_PARTS]
    )
    for column in columns:
        assert names.COLUMN_LABELS[column] and names.COLUMN_HELP[column], column
    assert set(names.COLUMN_LABELS) == set(names.COLUMN_HELP)
    assert names.COLUMN_LABELS["top_sink_alpha_se"] == "Strongest sink: alpha: ± SE"


def test_vocabularies_are_literals_with_their_tuples():
    assert names.SCORE_NAMES == get_args(names.ScoreName) == tuple(names.SCORE_LABELS)
    assert set(names.ABLATION_COLUMN) == set(names.RANKINGS)
    assert set(names.EXAMPLE_SCORES) < set(names.TEXT_SCORES)


def listed_modules(init: Path) -> set[str]:
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    return set(re.findall(r":mod:`([\w.]+)`", doc))


def test_package_docstrings_list_exactly_their_modules():
    for init in HEADS.rglob("__init__.py"):
        package = ".".join(init.parent.relative_to(ROOT).parts)
        held = {f"{package}.{p.stem}" for p in init.parent.glob("*.py") if p.stem != "__init__"}
        held |= {
            f"{package}.{d.name}" for d in init.parent.iterdir() if (d / "__init__.py").is_file()
        }
        assert listed_modules(init) == held, init
