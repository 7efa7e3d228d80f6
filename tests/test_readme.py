"""The README and the pages of docs/ stay true: their examples run, their tables match the code.

- Every ```python block of README.md and docs/*.md runs as written.
- The README is a front page: at most 300 lines, with the two set-up commands, which the Makefile
  and CI really run.
- Every link between the pages, and every repository path they name, exists.
- docs/worker.md lists every worker setting with its default and every dead-letter reason the code
  gives; docs/operations.md lists every metric the worker exports with its type and labels.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
WORKER_DOC = DOCS / "worker.md"
OPERATIONS_DOC = DOCS / "operations.md"
README_MAX_LINES = 300


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


BLOCKS = [
    (_name(page), i, source)
    for page in PAGES
    for i, source in enumerate(re.findall(r"```python\n(.*?)```", _text(page), flags=re.S))
]


def _rows(path: Path, first_header: str) -> list[list[str]]:
    """Cells of every row of the Markdown tables of ``path`` whose first header cell is ``first_header``."""
    lines = _text(path).splitlines()
    rows: list[list[str]] = []
    for i, line in enumerate(lines):
        if line.startswith(f"| {first_header} |"):
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                # a `|` inside backticks (NAME[:numeric|nominal]) is not a cell boundary
                cells = re.split(r"\|(?=(?:[^`]*`[^`]*`)*[^`]*$)", row.strip().strip("|"))
                rows.append([cell.strip() for cell in cells])
    return rows


# -- examples -------------------------------------------------------------------------------------------


def test_the_readme_and_the_library_page_have_python_examples() -> None:
    pages = {page for page, _, _ in BLOCKS}
    assert {"README.md", "docs/library.md"} <= pages


@pytest.mark.parametrize("page, index, source", BLOCKS, ids=[f"{p}-{i}" for p, i, _ in BLOCKS])
def test_python_example_runs(page: str, index: int, source: str, capsys: pytest.CaptureFixture[str]) -> None:
    # our own documentation, run like a doctest
    exec(compile(source, str(REPO / page), "exec"), {"__name__": "doc_example"})


# -- the front page -------------------------------------------------------------------------------------


def test_the_readme_is_a_front_page() -> None:
    lines = _text(README).splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_two_set_up_commands_are_stated_and_real() -> None:
    readme = _text(README)
    assert "make demo" in readme and "make test" in readme
    makefile = _text(REPO / "Makefile")
    assert re.search(r"^demo:", makefile, flags=re.M) and re.search(r"^test:", makefile, flags=re.M)
    assert re.search(r"^make test$", _text(REPO / ".ci" / "run"), flags=re.M)


def test_the_readme_links_every_page_of_docs() -> None:
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)", _text(README)))
    assert linked == {_name(p) for p in DOCS.glob("*.md")}


def test_the_readme_names_where_a_record_is_handled() -> None:
    steps = {row[0] for row in _rows(README, "step")}
    for step in ("decoded and validated", "joined with its label", "predicted, then learned"):
        assert step in steps, step
    assert {"checkpointed", "committed"} <= steps


# -- links and paths ------------------------------------------------------------------------------------


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", _text(path), flags=re.S)
    return {_anchor(h) for h in re.findall(r"^#{1,6} +(.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_link_to_a_page_and_its_section_exists(page: Path) -> None:
    for target, anchor in re.findall(r"\]\(([^)#:\s]*)(?:#([^)\s]+))?\)", _text(page)):
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{_name(page)} links to {target}, which does not exist"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), f"{_name(page)} links to {target}#{anchor}: no such heading"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_repository_path_named_exists(page: Path) -> None:
    pattern = r"`((?:sgt|worker|tests|deploy|docs|\.ci)/[\w./-]*?)(?:::(\w+))?`"
    named = re.findall(pattern, _text(page))
    for path, test in named:
        file = REPO / path.rstrip("/")
        assert file.exists(), f"{_name(page)} names {path}, which does not exist"
        if test:
            assert re.search(rf"^def {test}\(", _text(file), flags=re.M), f"{_name(page)}: {path}::{test}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_sgt_variable_named_is_a_setting(page: Path) -> None:
    from worker.config import SETTINGS

    # beside the settings: the settings file's path, the tests' switch for Prometheus, and the library's
    # switch for its compiled kernels (read by sgt.kernels when sgt is imported)
    known = {s.env for s in SETTINGS} | {"SGT_CONFIG", "SGT_REQUIRE_PROMETHEUS", "SGT_KERNELS"}
    unknown = set(re.findall(r"\bSGT_[A-Z0-9_]+\b", _text(page))) - known
    assert not unknown, f"{_name(page)} names {sorted(unknown)}, which are not worker settings"


# -- tables that must match the code ------------------------------------------------------------------


def _matches(documented: str, default: Any) -> bool:
    cell = documented.strip("`")
    if default is None or default == ():
        return cell == "none"
    if isinstance(default, bool) or not isinstance(default, int | float):
        return cell == str(default)
    try:
        return float(cell) == float(default)
    except ValueError:
        return False


def test_the_settings_tables_list_every_setting_with_its_default() -> None:
    from worker.config import SETTINGS

    rows = _rows(WORKER_DOC, "setting")
    documented = [row[0].strip("`") for row in rows]
    registry = [s.name for s in SETTINGS]
    missing = sorted(set(registry) - set(documented))
    extra = sorted(set(documented) - set(registry))
    twice = sorted({name for name in documented if documented.count(name) > 1})
    assert not (missing or extra or twice), (
        f"docs/worker.md's settings tables and worker.config.SETTINGS disagree: missing {missing}, "
        f"not settings {extra}, listed twice {twice}"
    )
    by_name = {s.name: s for s in SETTINGS}
    wrong = [
        f"{row[0]}: documented {row[1]}, default {by_name[row[0].strip('`')].default!r}"
        for row in rows
        if not _matches(row[1], by_name[row[0].strip("`")].default)
    ]
    assert not wrong, "docs/worker.md shows wrong defaults:\n" + "\n".join(wrong)


def test_flags_and_variables_follow_the_rule_the_settings_page_states() -> None:
    from worker.config import SETTINGS

    for setting in SETTINGS:
        base = setting.name.rstrip("_")
        assert setting.flag == "--" + base.replace("_", "-")
        assert setting.env == "SGT_" + base.upper()


def _dead_letter_reasons_in_code() -> set[str]:
    reasons = set()
    for path in (REPO / "worker").rglob("*.py"):
        source = _text(path)
        reasons |= set(re.findall(r"Invalid\(\s*\"(\w+)\"", source))
        reasons |= set(re.findall(r"_dead_letter\([^)]*?\"(\w+)\"\)", source))
        reasons |= set(re.findall(r"\breason = \"(\w+)\"", source))
    for module in ("records.py", "schema.py"):  # their checks return the reason, or None when valid
        source = _text(REPO / "worker" / "core" / module)
        reasons |= set(re.findall(r"return \"(\w+)\"", source))
        for pair in re.findall(r"\"(\w+)\" if .* else \"(\w+)\"", source):
            reasons |= set(pair)
    return reasons


def test_the_dead_letter_table_lists_the_reasons_the_code_gives() -> None:
    documented = {row[0].strip("`") for row in _rows(WORKER_DOC, "reason")}
    in_code = _dead_letter_reasons_in_code()
    assert len(in_code) >= 15
    assert in_code <= documented, f"reasons missing from docs/worker.md: {sorted(in_code - documented)}"
    sources = "".join(_text(p) for p in (REPO / "worker").rglob("*.py"))
    unknown = sorted(r for r in documented if f'"{r}"' not in sources)
    assert not unknown, f"docs/worker.md lists reasons the worker never gives: {unknown}"


def test_the_metrics_table_lists_every_metric_with_its_type_and_labels() -> None:
    from worker.metrics import WorkerMetrics

    metrics = WorkerMetrics()
    exported = {}
    for family in metrics.registry.collect():
        name = family.name + "_total" if family.type == "counter" else family.name
        exported[name] = family.type
    labels = {}
    for value in vars(metrics).values():
        name = getattr(value, "_name", None)
        if isinstance(name, str):
            kind = getattr(value, "_type", "")
            labels[name + "_total" if kind == "counter" else name] = tuple(getattr(value, "_labelnames", ()))
    documented = {
        row[0].strip("`"): (row[1], tuple(label.strip() for label in row[2].split(",") if label.strip()))
        for row in _rows(OPERATIONS_DOC, "metric")
    }
    assert set(documented) == set(exported), (
        f"docs/operations.md's metrics table: missing {sorted(set(exported) - set(documented))}, "
        f"not exported {sorted(set(documented) - set(exported))}"
    )
    for name, (kind, names) in documented.items():
        assert kind == exported[name], f"{name}: documented {kind}, exported {exported[name]}"
        if name in labels:
            assert names == labels[name], f"{name}: documented labels {names}, exported {labels[name]}"
