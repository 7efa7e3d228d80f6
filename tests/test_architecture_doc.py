"""docs/architecture.md stays the map of the code.

Its module tables list exactly the Python modules under ``sgt/`` and ``worker/`` (subpackages
included), each once; every function or class its table of steps names is defined in the modules of
that row; every test it cites as proof of an invariant exists.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
PACKAGES = ("sgt", "worker")


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _table(first_header: str) -> list[list[str]]:
    """Cells of every row of the Markdown tables whose first header cell is ``first_header``."""
    rows: list[list[str]] = []
    lines = _doc().splitlines()
    for i, line in enumerate(lines):
        if not line.startswith(f"| {first_header} |"):
            continue
        for row in lines[i + 2 :]:
            if not row.startswith("|"):
                break
            rows.append([cell.strip() for cell in row.strip("|").split("|")])
    return rows


def _modules_on_disk() -> set[str]:
    found = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if "__pycache__" not in path.parts:
                found.add(path.relative_to(REPO).as_posix())
    return found


def _modules_in_doc() -> list[str]:
    named = []
    for row in _table("module"):
        match = re.fullmatch(r"`([\w/]+\.py)`", row[0])
        assert match, f"docs/architecture.md: a module table's first cell is not a `path.py`: {row[0]!r}"
        named.append(match.group(1))
    return named


def test_the_module_tables_list_every_module_and_only_existing_ones() -> None:
    named = _modules_in_doc()
    on_disk = _modules_on_disk()
    assert len(on_disk) > 30
    missing = sorted(on_disk - set(named))
    extra = sorted(set(named) - on_disk)
    twice = sorted({m for m in named if named.count(m) > 1})
    assert not (missing or extra or twice), (
        "docs/architecture.md and the code disagree:\n"
        + (f"  modules with no line in the map (add one): {missing}\n" if missing else "")
        + (f"  lines for modules that do not exist (remove or rename): {extra}\n" if extra else "")
        + (f"  modules listed more than once: {twice}\n" if twice else "")
    )


def _defined_names(module: str) -> set[str]:
    source = (REPO / module).read_text(encoding="utf-8")
    return set(re.findall(r"^\s*(?:def|class)\s+(\w+)", source, flags=re.M))


def test_every_function_the_steps_name_is_defined_in_their_modules() -> None:
    rows = _table("step")
    assert len(rows) >= 10
    for step, modules_cell, names_cell in rows:
        modules = re.findall(r"`([\w/]+\.py)`", modules_cell)
        assert modules and all((REPO / m).is_file() for m in modules), (step, modules_cell)
        defined = set().union(*(_defined_names(m) for m in modules))
        for name in re.findall(r"`([\w.]+)`", names_cell):
            assert name.split(".")[-1] in defined, f"step {step!r}: {name} is not defined in {modules}"


def test_the_steps_cover_the_path_a_newcomer_looks_for() -> None:
    steps = {row[0] for row in _table("step")}
    for step in ("decoded", "joined", "predicted and learned", "checkpointed", "committed"):
        assert step in steps, step


def test_every_test_cited_as_proof_exists() -> None:
    cited = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", _doc())
    assert len(cited) >= 8
    for path, name in cited:
        file = REPO / path
        assert file.is_file(), f"docs/architecture.md cites {path}, which does not exist"
        source = file.read_text(encoding="utf-8")
        assert re.search(rf"^def {name}\(", source, flags=re.M), f"docs/architecture.md cites {path}::{name}"


def test_every_invariant_cites_a_test() -> None:
    text = _doc()
    for invariant in ("**Exactness", "**Determinism", "**Checkpoint, then commit"):
        start = text.index(invariant)
        following = text[start:].split("\n**", 1)[0]
        assert "`tests/" in following, invariant


def _module_tables() -> list[list[str]]:
    """The modules each module table lists, one list per table, in the page's order."""
    tables: list[list[str]] = []
    lines = _doc().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| module |"):
            tables.append([])
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                tables[-1].append(row.strip("|").split("|")[0].strip().strip("`"))
    return tables


def test_each_worker_table_is_one_folder_of_the_layout() -> None:
    """The worker's map follows its folders: one table per folder, so the table says the layer."""
    folders = []
    for table in _module_tables():
        parents = {str(Path(m).parent) for m in table}
        if any(m.startswith("worker/") for m in table):
            assert len(parents) == 1, f"docs/architecture.md: a worker table mixes folders {sorted(parents)}"
            folders.append(parents.pop())
    assert len(folders) == len(set(folders)), f"a folder has more than one table: {folders}"
    on_disk = {str(Path(m).parent) for m in _modules_on_disk() if m.startswith("worker/")}
    assert set(folders) == on_disk
