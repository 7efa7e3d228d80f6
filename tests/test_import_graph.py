"""The packages' import graphs have no cycle, counting imports inside functions too.

A cycle ties its modules together (none can be imported, tested or changed alone) and hides behind
imports deferred into functions, so every ``import`` statement counts. In ``sgt`` those under
``if TYPE_CHECKING:`` do not, since they never run; in ``worker`` they count too: a module that names
another's types depends on it as much as one that calls it, and the worker's layers (the Kafka-free
core below the Kafka shell, the checkpoint protocol and the state topic) are kept by its types too
(the layering tests below). The graph is read from the source with ``ast``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _modules(package: str) -> dict[str, Path]:
    """Dotted name -> source file, for every module of `package` (subpackages included)."""
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(node: ast.AST, type_checking: bool = False) -> Iterator[ast.AST]:
    """Every statement below `node`; the bodies of ``if TYPE_CHECKING:`` only if `type_checking`."""
    for child in ast.iter_child_nodes(node):
        if not type_checking and isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from _statements(other)
            continue
        yield child
        yield from _statements(child, type_checking)


def imported(name: str, path: Path, modules: dict[str, Path], type_checking: bool = False) -> set[str]:
    """Every module `name` imports, of `modules` or not (``from a import b``: ``a.b`` if it is one of
    `modules`, else ``a``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in _statements(ast.parse(path.read_text(encoding="utf-8")), type_checking):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package up
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = {f"{base}.{alias.name}" for alias in node.names} & modules.keys()
            out.update(submodules or {base})
    return out


def _imports(name: str, path: Path, modules: dict[str, Path], type_checking: bool = False) -> set[str]:
    """The modules of `modules` that module `name` imports."""
    return (imported(name, path, modules, type_checking) & modules.keys()) - {name}


#: whether the imports under ``if TYPE_CHECKING:`` count as edges of the package's graph
TYPE_CHECKING_COUNTS = {"sgt": False, "worker": True}


def graph_of(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (its import graph)."""
    modules = _modules(package)
    counts = TYPE_CHECKING_COUNTS[package]
    return {name: _imports(name, path, modules, counts) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path that starts and ends at the same module, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize("package", ["sgt", "worker"])
def test_the_import_graph_has_no_cycle(package: str) -> None:
    graph = graph_of(package)
    assert len(graph) > 5 and any(graph.values())  # the walk found the package and its imports
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"


def test_a_cycle_is_found() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_format_module_knows_no_model() -> None:
    modules = _modules("sgt")
    assert _imports("sgt.serialization", modules["sgt.serialization"], modules) == set()


# -- the worker's layers ------------------------------------------------------------------------------

#: the worker's subpackages that sit above its Kafka-free core
_ABOVE_CORE = ("worker.kafka", "worker.checkpoints", "worker.state_topic")
#: the modules of the Kafka shell: the loop, the partitions' runtime, rebalances, publishing (its
#: clients' settings and holder, ``worker.kafka.clients``, are below them)
_SHELL = tuple(
    f"worker.kafka.{m}"
    for m in ("loop", "partition_runtime", "rebalance", "publisher", "positions", "delivery")
)
#: what a package may not import (a name or anything below it), and why
LAYERS: dict[str, tuple[tuple[str, ...], str]] = {
    "worker.core": (("confluent_kafka", *_ABOVE_CORE), "the core is Kafka-free"),
    "worker.state_topic": (("worker.kafka", "worker.checkpoints"), "the state topic is storage only"),
    "worker.checkpoints": (_SHELL, "the checkpoint protocol serves the shell and knows none of it"),
}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layering_violations(modules: dict[str, Path]) -> list[str]:
    """`module -> import` for every import that crosses a layer of :data:`LAYERS` the wrong way
    (imports under ``if TYPE_CHECKING:`` included)."""
    found = []
    for name, path in sorted(modules.items()):
        for package, (forbidden, _why) in LAYERS.items():
            if not _within(name, package):
                continue
            for target in sorted(imported(name, path, modules, type_checking=True)):
                if any(_within(target, f) for f in forbidden):
                    found.append(f"{name} -> {target}")
    return found


def test_the_worker_layers_import_only_the_layers_below_them() -> None:
    modules = _modules("worker")
    assert sum(_within(m, "worker.core") for m in modules) > 8  # the walk found the core
    violations = layering_violations(modules)
    assert not violations, "imports across the worker's layers:\n  " + "\n  ".join(violations)


def test_a_type_checking_import_across_a_layer_is_found(tmp_path: Path) -> None:
    """A core module that imports the Kafka shell only for its types still depends on it."""
    core = tmp_path / "worker" / "core"
    core.mkdir(parents=True)
    (core / "bad.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from worker.kafka.loop import Worker\n"
    )
    (core / "kafkaish.py").write_text("def f() -> None:\n    import confluent_kafka\n")
    (core / "fine.py").write_text("from worker.core.bad import x\n")
    modules = {f"worker.core.{p.stem}": p for p in core.glob("*.py")}
    assert layering_violations(modules) == [
        "worker.core.bad -> worker.kafka.loop",
        "worker.core.kafkaish -> confluent_kafka",
    ]
