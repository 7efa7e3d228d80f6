"""Views of a model for people: a JSON-safe dict, indented text, and Graphviz dot.

>>> from sgt import SGTRegressor
>>> model = SGTRegressor(grace_period=20, warm_up=20, delta=1e-7, leaf_model="constant")
>>> for i in range(400):
...     model.learn_one({"x": i % 20}, 10.0 if i % 20 >= 10 else 0.0)
>>> print(model.to_text())
tree 0
  x <= 9.5 or missing
    leaf value=0 n=160
  x > 9.5
    leaf value=10 n=10
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sgt.base import BaseSGT
    from sgt.tree import Tree

__all__ = ["to_dict", "to_dot", "to_text"]


def to_dict(model: BaseSGT) -> dict[str, Any]:
    """The model as nested plain data (see docs: the `trees` list holds one root node per tree).

    An ensemble lists its members' trees member after member, and `members` gives how many trees each
    member holds (a background ensemble, learning since a drift warning, is left out)."""
    space = model._space
    features = [
        {
            "name": name,
            "kind": "nominal" if space.is_nominal(j) else "numeric",
            "range": list(grid) if (grid := space.range_of(j)) else None,
            "categories": space.categories(j),
        }
        for j, name in enumerate(space.names)
    ]
    out: dict[str, Any] = {
        "model": type(model).__name__,
        "params": model.get_params(),
        "features": features,
        "trees": [_node(model, tree, 0) for _, tree in _labelled_trees(model)],
    }
    groups = model._tree_groups()
    if any(group.name for group in groups):  # an ensemble's members
        out["members"] = [len(group.trees) for group in groups]
    classes = _committee_classes(model)
    if classes is not None:
        out["classes"] = classes
    return out


def _committee_classes(model: BaseSGT) -> list[Any] | None:
    """The classes of a committee classifier (its trees are classes 1.. against class 0), else None."""
    return getattr(model, "classes_", None) if hasattr(model, "_classes") else None


def _labelled_trees(model: BaseSGT) -> list[tuple[str, Tree]]:
    """Each tree a view shows, with its heading: "tree t", or "member m tree t" in an ensemble, and
    for a committee classifier the class the tree scores against the reference class."""
    classes = _committee_classes(model) or []
    out = []
    for group in model._tree_groups():
        prefix = f"{group.name} " if group.name else ""
        # the class of the group's next output: the second, unless its one tree scores every class
        every = len(group.trees) == 1 and group.trees[0].n_outputs == len(classes) > 1
        first = 0 if every else 1
        for t, tree in enumerate(group.trees):
            scored = classes[first : first + tree.n_outputs]
            first += tree.n_outputs
            if not scored:
                versus = ""
            elif every:  # a multi-output tree with a value per class
                versus = f" (classes {', '.join(map(repr, scored))})"
            elif tree.n_outputs == 1:
                versus = f" (class {scored[0]!r} against {classes[0]!r})"
            else:  # a multi-output tree with a value per class but the first
                versus = f" (classes {', '.join(map(repr, scored))} against {classes[0]!r})"
            out.append((f"{prefix}tree {t}{versus}", tree))
    return out


def _node(model: BaseSGT, tree: Tree, node: int) -> dict[str, Any]:
    base = model._base()
    multi = tree.n_outputs > 1  # a multi-output tree: a value (and weights) per output, in a list
    values = [float(v) + base for v in tree.value[node].reshape(-1)]
    out: dict[str, Any] = {
        "id": node,
        "value": values if multi else values[0],
        "depth": int(tree.depth[node]),
    }
    feature = int(tree.feature[node])
    if tree.linear:  # linear leaves: the weight of each numeric feature's input (sgt.layout.leaf_inputs)
        names, rows = model._space.names, tree.weights[node].reshape(tree.n_outputs, -1)
        weights = [{names[j]: float(row[j]) for j in tree.layout.numeric} for row in rows]
        out["weights"] = weights if multi else weights[0]
    if feature < 0:
        out.update(leaf=True, n=tree.leaf_count(node))
        if tree.adaptive:  # what the leaf serves, and its constant (see sgt.linear_term's _choose)
            constant = float(tree.value[node]) + float(tree.anchor[node]) + base
            out.update(serves="linear" if tree.serving[node] else "constant", constant=constant)
        return out
    space = model._space
    out.update(leaf=False, feature=space.names[feature])
    if tree.table[node] >= 0:
        lookup = tree.tables[tree.table[node]]
        codes = [c for c in range(lookup.size) if lookup[c] >= 0]
        children = [int(lookup[c]) for c in codes]
        categories = space.categories(feature)
        out.update(kind="nominal", categories=[categories[c - 1] for c in codes])
    else:
        children = [int(tree.left[node]), int(tree.right[node])]
        t = int(tree.threshold[node]) - 1
        threshold: float | None = space.threshold_value(feature, t)
        if threshold == math.inf:  # every value goes left (a grid grown below moved the split to its end):
            threshold = None  # JSON has no infinity
        out.update(kind="numeric", threshold=threshold, bin=t)
    out["missing"] = children.index(int(tree.missing[node]))
    out["children"] = [_node(model, tree, c) for c in children]
    return out


def to_text(model: BaseSGT) -> str:
    """Indented text, one line per branch condition and leaf; an ensemble's starts with its settings."""
    lines: list[str] = []
    heading = model._view_heading()
    if heading is not None:
        lines.append(heading)
    for (title, _), root in zip(_labelled_trees(model), to_dict(model)["trees"]):
        lines.append(title)
        _text(root, 1, lines)
    return "\n".join(lines)


def _text(node: dict[str, Any], indent: int, lines: list[str]) -> None:
    pad = "  " * indent
    if node["leaf"]:
        serves = f" serves {node['serves']} (constant={node['constant']:.6g})" if "serves" in node else ""
        lines.append(f"{pad}leaf value={_format(node['value'], '.6g')} n={node['n']}{serves}")
        return
    for k, child in enumerate(node["children"]):
        condition = _condition(node, k)
        if k == node["missing"]:
            condition += " or missing"
        lines.append(f"{pad}{condition}")
        _text(child, indent + 1, lines)


def _condition(node: dict[str, Any], k: int) -> str:
    return f"{node['feature']} {_relation(node, k)}"


def _relation(node: dict[str, Any], k: int) -> str:
    """Branch k's test of the node's feature, without the feature's name (which may hold spaces)."""
    if node["kind"] == "numeric":
        op = "<=" if k == 0 else ">"
        threshold = math.inf if node["threshold"] is None else node["threshold"]  # (see `_node`)
        return f"{op} {threshold:.6g}"
    category = node["categories"][k]
    if category is None:  # the shared code of the categories beyond max_categories
        return "is another category"
    return f"== {category!r}"


def to_dot(model: BaseSGT) -> str:
    """Graphviz source: `dot -Tpng` draws it. One cluster per tree (of a committee or an ensemble)."""
    lines = ["digraph sgt {", '  node [shape=box, fontname="Helvetica"];']
    for t, ((title, _), root) in enumerate(zip(_labelled_trees(model), to_dict(model)["trees"])):
        lines.append(f'  subgraph cluster_{t} {{ label="{_escape(title)}";')
        _dot(root, f"t{t}", lines)
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def _dot(node: dict[str, Any], prefix: str, lines: list[str]) -> None:
    me = f"{prefix}n{node['id']}"
    if node["leaf"]:
        lines.append(f'    {me} [label="{_format(node["value"], ".4g")}\\nn={node["n"]}", style=rounded];')
        return
    lines.append(f'    {me} [label="{_escape(str(node["feature"]))}"];')  # (an integer name too)
    for k, child in enumerate(node["children"]):
        condition = _relation(node, k)
        if k == node["missing"]:
            condition += " (missing)"
        lines.append(f'    {me} -> {prefix}n{child["id"]} [label="{_escape(condition)}"];')
        _dot(child, prefix, lines)


def _format(value: float | list[float], spec: str) -> str:
    """A leaf's value, or a multi-output leaf's values in brackets."""
    if isinstance(value, list):
        return "[" + ", ".join(format(v, spec) for v in value) + "]"
    return format(value, spec)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
