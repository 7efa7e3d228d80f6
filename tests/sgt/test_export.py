"""Introspection and the exports for people: ``to_dict`` (JSON-safe), ``to_text`` and ``to_dot``,
the size counters and ``nbytes`` (at most 3.5 KiB of split statistics per numeric feature per leaf).
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

import numpy as np
import pytest

from sgt import MILClassifier, SGTClassifier, SGTRegressor
from tests.sgt.sgt_testkit import (
    iter_nodes,
    mixed_records,
    multiclass_stream,
    step_regression_stream,
    threshold_stream,
)

# grace_start = grace_period: the memory tests measure a single leaf, whose first attempt is then at 100
SMALL = {"grace_period": 100, "grace_start": 100, "warm_up": 100}
LEAF_KEYS = {"id", "value", "depth", "leaf", "n"}
NUMERIC_KEYS = {"id", "value", "depth", "leaf", "feature", "kind", "threshold", "bin", "missing", "children"}
NOMINAL_KEYS = {"id", "value", "depth", "leaf", "feature", "kind", "categories", "missing", "children"}


@functools.cache
def _models() -> dict[str, object]:
    X, y = threshold_stream(4000, seed=70)
    Xm, ym = multiclass_stream(4000, seed=71)
    Xr, yr = step_regression_stream(4000, seed=72)
    records, labels = mixed_records(4000, seed=73)
    binary = SGTClassifier(**SMALL)
    binary.learn_many(X, y)
    committee = SGTClassifier(**SMALL)
    committee.learn_many(Xm, ym)
    regressor = SGTRegressor(**SMALL)
    regressor.learn_many(Xr, yr)
    mixed = SGTClassifier(**SMALL)
    mixed.learn_many(records, labels)
    bags = [X[i : i + 3] for i in range(0, 3000, 3)]
    mil = MILClassifier(**SMALL).fit(bags, [int(np.any(bag[:, 0] > 0.8)) for bag in bags], epochs=2)
    return {"binary": binary, "committee": committee, "regressor": regressor, "mixed": mixed, "mil": mil}


NAMES = ["binary", "committee", "regressor", "mixed", "mil"]


def test_every_model_has_split() -> None:
    assert list(_models()) == NAMES
    assert all(model.n_splits >= 1 for model in _models().values())


@pytest.mark.parametrize("name", NAMES)
def test_to_dict_is_json_safe_and_complete(name: str) -> None:
    model = _models()[name]
    d = model.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert d["model"] == type(model).__name__
    assert set(d["params"]) >= {"delta", "grace_period", "lambda_", "gamma", "bins", "warm_up", "max_depth"}
    if isinstance(model, SGTClassifier):
        assert d["classes"] == model.classes_
        assert len(d["trees"]) == max(1, len(model.classes_) - 1)
    else:
        assert "classes" not in d
        assert len(d["trees"]) == 1
    for f in d["features"]:
        assert set(f) == {"name", "kind", "range", "categories"}
        if f["kind"] == "numeric":
            lo, hi = f["range"]
            assert lo <= hi and f["categories"] == []
        else:
            assert f["range"] is None and len(f["categories"]) >= 1


@pytest.mark.parametrize("name", NAMES)
def test_tree_nodes_follow_the_schema(name: str) -> None:
    model = _models()[name]
    d = model.to_dict()
    features = {f["name"]: f for f in d["features"]}
    # the views show the serving tree of a regressor with leaf_model="auto": its own leaf model
    leaf_model = (
        model._trees[model._serving()].params.leaf_model if model.leaf_model == "auto" else model.leaf_model
    )
    linear = {"weights"} if leaf_model in ("linear", "adaptive") else set()  # every node's linear term
    # an adaptive leaf's choice and its constant
    adaptive = {"serves", "constant"} if leaf_model == "adaptive" else set()
    numeric = {name for name, f in features.items() if f["kind"] == "numeric"}
    for tree in d["trees"]:
        assert tree["depth"] == 0
        ids = [node["id"] for node in iter_nodes(tree)]
        assert len(ids) == len(set(ids))
        for node in iter_nodes(tree):
            assert math.isfinite(node["value"])
            if linear:
                assert set(node["weights"]) == numeric and all(map(math.isfinite, node["weights"].values()))
            if node["leaf"]:
                assert set(node) == LEAF_KEYS | linear | adaptive
                assert node["n"] >= 0
                if adaptive:
                    assert node["serves"] in ("linear", "constant") and math.isfinite(node["constant"])
                continue
            children = node["children"]
            assert all(child["depth"] == node["depth"] + 1 for child in children)
            assert 0 <= node["missing"] < len(children)
            assert node["kind"] == features[node["feature"]]["kind"]
            if node["kind"] == "numeric":
                assert set(node) == NUMERIC_KEYS | linear and len(children) == 2
                lo, hi = features[node["feature"]]["range"]
                assert lo < node["threshold"] < hi
            else:
                assert set(node) == NOMINAL_KEYS | linear and len(children) == len(node["categories"]) >= 2
                assert set(node["categories"]) <= set(features[node["feature"]]["categories"])


def test_mixed_model_has_both_kinds_of_split() -> None:
    kinds = {n["kind"] for t in _models()["mixed"].to_dict()["trees"] for n in iter_nodes(t) if not n["leaf"]}
    assert kinds == {"numeric", "nominal"}


@pytest.mark.parametrize("name", NAMES)
def test_to_text_names_every_split(name: str) -> None:
    model = _models()[name]
    text = model.to_text()
    assert isinstance(text, str) and text.strip()
    for tree in model.to_dict()["trees"]:
        for node in iter_nodes(tree):
            if not node["leaf"]:
                assert node["feature"] in text
                if node["kind"] == "numeric":
                    assert _shows_number(text, node["threshold"]), node["threshold"]
                else:
                    assert all(str(c) in text for c in node["categories"])
    assert text.count("\n") + 1 >= _shown_nodes(model)


def _shown_nodes(model: Any) -> int:
    """The nodes of the trees the views show (all of the model's but with leaf_model="auto", whose
    views show the serving tree)."""
    return sum(1 for tree in model.to_dict()["trees"] for _ in iter_nodes(tree))


def _shows_number(text: str, value: float) -> bool:
    numbers = [float(m) for m in re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)]
    return any(math.isclose(v, value, rel_tol=1e-3, abs_tol=1e-9) for v in numbers)


@pytest.mark.parametrize("name", NAMES)
def test_to_dot_is_a_graph_with_one_vertex_per_node(name: str) -> None:
    model = _models()[name]
    dot = model.to_dot()
    assert re.match(r"\s*(strict\s+)?digraph\b", dot)
    assert dot.count("{") == dot.count("}") >= 1
    edges = dot.count("->")
    assert edges == _shown_nodes(model) - len(model.to_dict()["trees"])
    vertices = len(re.findall(r"^\s*\"?[\w:.-]+\"?\s*\[", dot, flags=re.MULTILINE))
    assert vertices >= _shown_nodes(model)


def test_exports_of_a_fresh_model() -> None:
    for model in (SGTClassifier(), SGTRegressor(), MILClassifier()):
        d = model.to_dict()
        assert json.loads(json.dumps(d, allow_nan=False)) == d
        assert d["features"] == []
        assert isinstance(model.to_text(), str)
        assert "digraph" in model.to_dot()
        assert (model.n_splits, model.n_updates, model.n_seen, model.depth) == (0, 0, 0, 0)


def test_nominal_categories_of_any_json_scalar_export_cleanly() -> None:
    model = SGTRegressor(nominal=["code"], **SMALL)
    rng = np.random.default_rng(74)
    codes = rng.choice([1, 2.5, True, "x"], 3000).tolist()
    model.learn_many([{"code": c} for c in codes], [float(hash(str(c)) % 7) for c in codes])
    d = model.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert "digraph" in model.to_dot() and model.to_text()


def test_the_graph_names_integer_features_and_names_with_spaces() -> None:
    # regression: to_dot escaped the name as a string (an integer name, which River's generators use,
    # raised AttributeError) and cut each branch's label at the name's first space
    rng = np.random.default_rng(75)
    X = rng.uniform(0.0, 1.0, (3000, 2))
    model = SGTRegressor(leaf_model="constant", **SMALL)
    y = (X[:, 0] > 0.5) + 2.0 * (X[:, 1] > 0.5)
    model.learn_many([{0: a, "monthly income": b} for a, b in X.tolist()], y.tolist())
    dot = model.to_dot()
    tested = {n["feature"] for n in iter_nodes(model.to_dict()["trees"][0]) if not n["leaf"]}
    assert tested == {0, "monthly income"}
    assert 'label="0"' in dot and 'label="monthly income"' in dot
    assert 'label="income' not in dot
    operators = re.findall(r'-> \w+ \[label="(\S+) ', dot)  # each branch's label starts with its test
    assert operators and set(operators) <= {"<=", ">"}


def test_a_split_every_value_passes_left_of_exports_as_json() -> None:
    # regression: a grid grown below its first values can move a split to the grid's end, where its
    # threshold is infinite (every value goes left), and to_dict, JSON-safe by its contract, held inf
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(0.0, 1.0, 300), rng.uniform(-50.0, 1.0, 300)])
    model = SGTRegressor(grace_period=10, grace_start=5, warm_up=1000, leaf_model="constant")
    model.learn_many([{"x": v} for v in x.tolist()], ((x > 0.5) + rng.normal(0.0, 0.1, 600)).tolist())
    d = model.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    every = [n for n in iter_nodes(d["trees"][0]) if not n["leaf"] and n["threshold"] is None]
    assert every and all(n["bin"] == 63 for n in every)
    assert "x <= inf" in model.to_text() and "x > inf" in model.to_text()


def test_nbytes_stays_within_3_5_kib_per_numeric_feature_per_leaf() -> None:
    rng = np.random.default_rng(75)
    X = rng.uniform(0.0, 1.0, (6000, 20))
    y = 3.0 * (X[:, 0] > 0.5) + 2.0 * (X[:, 1] > 0.5) + rng.normal(0.0, 0.1, 6000)
    model = SGTRegressor(**SMALL, leaf_model="adaptive")  # (one tree: "auto" has three)
    model.learn_many(X[:90], y[:90])  # before the first attempt, at 100
    one_leaf = model.nbytes
    assert model.n_leaves == 1
    assert one_leaf <= 3.5 * 1024 * 20 + 16 * 1024
    model.learn_many(X[90:], y[90:])
    assert model.n_leaves >= 3
    assert model.nbytes <= (3.5 * 1024 * 20 + 1024) * model.n_leaves + 16 * 1024


def test_nbytes_grows_with_features_and_bins() -> None:
    X = np.random.default_rng(76).uniform(size=(300, 10))
    small, wide, fine = SGTRegressor(**SMALL), SGTRegressor(**SMALL), SGTRegressor(bins=256, **SMALL)
    small.learn_many(X[:, :2], X[:, 0])
    wide.learn_many(X, X[:, 0])
    fine.learn_many(X[:, :2], X[:, 0])
    assert small.nbytes < wide.nbytes
    assert small.nbytes < fine.nbytes


def test_each_numeric_feature_costs_at_most_3_5_kib_per_leaf() -> None:
    """The marginal memory of one more numeric feature in a leaf (64 bins, default grace period)."""
    rng = np.random.default_rng(77)
    sizes = {}
    for n_features in (10, 50):
        model = SGTRegressor(
            grace_start=100, leaf_model="adaptive"
        )  # a single leaf: the first attempt at 100
        model.learn_many(rng.uniform(size=(90, n_features)), rng.normal(size=90))
        assert model.n_leaves == 1
        sizes[n_features] = model.nbytes
    assert (sizes[50] - sizes[10]) / 40 <= 3.5 * 1024


def test_the_export_functions_show_an_ensemble_member_by_member() -> None:
    """Regression: ``sgt.export.to_text`` on an ensemble indexed the classes by the position of a tree
    among all members' trees and raised IndexError; the views now name each member's trees."""
    from sgt import BoostedClassifier, export

    Xm, ym = multiclass_stream(3000, seed=71)
    model = BoostedClassifier(n_members=3, multiclass_trees="per-class", **SMALL)  # (multi-output members:
    # test_multioutput.py)
    model.learn_many(Xm, ym)
    per_member = model.n_trees // 3
    text = export.to_text(model)
    assert text == model.to_text()
    assert text.startswith(f"BoostedClassifier: 3 members, {model.n_trees} trees (n_members=3,")
    classes = model.classes_
    assert f"member 2 tree {per_member - 1} (class {classes[-1]!r} against {classes[0]!r})" in text
    d = export.to_dict(model)
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert d["members"] == [per_member] * 3 and len(d["trees"]) == model.n_trees
    dot = export.to_dot(model)
    assert dot.count("subgraph") == model.n_trees and 'label="member 0 tree 0' in dot
    assert dot.count("->") == model.n_nodes - model.n_trees
