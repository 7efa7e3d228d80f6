"""sgt.boosted.mondrian.MondrianForest: exact (any batching, the one-record loop and a restore at any
point give the same probabilities and bytes; the compiled walk and the Python walk the same bits), its
nodes within their bound, and accurate where a Mondrian forest should be."""

from __future__ import annotations

import hashlib
import itertools
import random
import subprocess
import sys
from types import FunctionType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import kernels
from sgt.boosted import mondrian
from sgt.boosted.mondrian import MondrianForest
from sgt.serialization import SerializationError, decode, encode
from tests.bench import stress
from tests.sgt.sgt_testkit import mixed_records

#: small trees that fill (the bound binds), grids that grow over the first records (regrids), few trees
SMALL: dict[str, Any] = {"trees": 3, "max_nodes": 31, "warm_up": 40, "bins": 16, "seed": 7}
N = 600
PROPERTY = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
needs_numba = pytest.mark.skipif(kernels.numba is None, reason="the kernels need numba")


def _stream() -> tuple[list[dict[str, Any]], list[Any]]:
    """Dict records of a numeric, a nominal and a sparse feature (missing as None, NaN or absent), a
    feature first seen at row 200 and a third class from row 300 on."""
    records, labels = mixed_records(N, seed=5)
    out: list[Any] = list(labels)
    for i in range(200, N, 3):
        records[i]["late"] = float(i % 17)
    for i in range(300, N, 5):
        out[i] = "third"
    return records, out


_RECORDS, _LABELS = _stream()


def _loop() -> tuple[list[dict[Any, float]], bytes]:
    """The one-record loop: each record's probabilities, then the record learned."""
    model = MondrianForest(**SMALL)
    proba = []
    for x, y in zip(_RECORDS, _LABELS, strict=True):
        proba.append(model.predict_proba_one(x))
        model.learn_one(x, y)
    return proba, model.to_bytes()


_LOOP = _loop()


def _batches(cuts: list[int]) -> list[slice]:
    return [slice(a, b) for a, b in itertools.pairwise([0, *cuts, N])]


def _rows(proba: np.ndarray, classes: list[Any]) -> list[dict[Any, float]]:
    """A batch's probabilities as the loop's dicts (the classes known when each row was predicted)."""
    return [{c: float(p[j]) for j, c in enumerate(classes) if p.sum() > 0} for p in proba]


@PROPERTY
@given(
    cuts=st.lists(st.integers(1, N - 1), max_size=8, unique=True).map(sorted),
    methods=st.lists(st.sampled_from(["predict_learn_many", "learn_many", "loop", "restore"]), min_size=9),
)
def test_any_batching_and_restores_give_the_loop_s_probabilities_and_bytes(
    cuts: list[int], methods: list[str]
) -> None:
    model = MondrianForest(**SMALL)
    for part, method in zip(_batches(cuts), methods, strict=False):
        if method == "restore":
            model = MondrianForest.from_bytes(model.to_bytes())
            method = "predict_learn_many"
        if method == "loop":
            for x, y in zip(_RECORDS[part], _LABELS[part], strict=True):
                model.learn_one(x, y)
        elif method == "learn_many":
            model.learn_many(_RECORDS[part], _LABELS[part])
        else:
            proba = model.predict_learn_many(_RECORDS[part], _LABELS[part])
            expected = _LOOP[0][part]
            got = _rows(proba, model.classes_)
            assert [
                {c: v for c, v in row.items() if c in want} for row, want in zip(got, expected)
            ] == expected
    model.learn_many([], [])  # (an empty batch changes nothing)
    assert model.to_bytes() == _LOOP[1]


def test_the_stream_exercises_what_the_exactness_rests_on() -> None:
    """The grids grow (regrids), the bound binds, a feature and a class arrive late."""
    model = MondrianForest(**SMALL)
    model.learn_many(_RECORDS, _LABELS)
    assert (model._size == SMALL["max_nodes"]).all()
    assert model.classes_[-1] == "third" and "late" in model._space.names
    space = MondrianForest(**SMALL)._space
    space.encode_rows(_RECORDS[:60], None)
    assert space.take_regrids(), "the stream must grow a grid within its warm-up"


@needs_numba
def test_the_kernel_and_the_python_walk_give_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = {}
    for enabled in (True, False):
        monkeypatch.setattr(kernels, "ENABLED", enabled)
        model = MondrianForest(**SMALL)
        first = model.predict_learn_many(_RECORDS[:350], _LABELS[:350])
        blob = model.to_bytes()
        monkeypatch.setattr(kernels, "ENABLED", not enabled)  # saved by one, continued by the other
        restored = MondrianForest.from_bytes(blob)
        second = restored.predict_learn_many(_RECORDS[350:], _LABELS[350:])
        runs[enabled] = (first.tolist(), blob, second.tolist(), restored.to_bytes())
    assert runs[True] == runs[False]
    assert runs[True][3] == _LOOP[1]


@needs_numba
def test_a_planted_bug_in_the_python_walk_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above can fail: the Python form drawing its threshold from another draw than the
    kernel's learns other trees."""
    names = mondrian._PYTHON_ROWS.__globals__  # (the Python form's own names: the kernel's are apart)
    uniform = names["_uniform"]
    monkeypatch.setitem(names, "_uniform", lambda key, slot: uniform(key, slot + (slot % 3 == 2)))
    blobs = []
    for enabled in (True, False):
        monkeypatch.setattr(kernels, "ENABLED", enabled)
        model = MondrianForest(**SMALL)
        model.learn_many(_RECORDS, _LABELS)
        blobs.append(model.to_bytes())
    assert blobs[0] != blobs[1]


@needs_numba
def test_the_python_walk_calls_no_compiled_code() -> None:
    """Without the kernels (SGT_KERNELS=0, the tests' switch) the walk runs no compiled code: every
    name its functions call, down to splitmix64's, is a Python function. Catches the Python form
    calling the compiled kernels it was written beside (numba's `py_func` alone does)."""
    compiled = kernels.numba.core.registry.CPUDispatcher
    pending: list[Any] = [mondrian._PYTHON_ROWS]
    seen: set[Any] = set()
    while pending:
        function = pending.pop()
        seen.add(function)
        for name in function.__code__.co_names:
            value = function.__globals__.get(name)
            assert not isinstance(value, compiled), f"{function.__name__} calls {name} compiled"
            if isinstance(value, FunctionType) and value.__module__.startswith("sgt.kernels"):
                pending.extend({value} - seen)
    assert {f.__name__ for f in seen} >= {"mondrian_rows", "_learn", "_split", "_uniform", "mix", "unit"}


def test_without_numba_the_python_walk_learns_the_kernel_s_bytes() -> None:
    """In a fresh interpreter that cannot import numba (a machine without the `fast` extra), the
    one-record loop saves the bytes it saves here (with the kernels, where numba is installed)."""
    script = (
        "import sys; sys.modules['numba'] = None\n"
        "import hashlib\n"
        "from sgt import kernels\n"
        "from tests.sgt.test_mondrian import _LOOP\n"
        "print(kernels.ENABLED, hashlib.sha256(_LOOP[1]).hexdigest())\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", hashlib.sha256(_LOOP[1]).hexdigest()]


def test_the_nodes_stay_within_their_bound_and_the_leaves_keep_counting() -> None:
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (3000, 4))
    y = (X[:, 0] + rng.normal(0, 0.3, 3000) > 0.5).astype(int)
    model = MondrianForest(trees=4, max_nodes=63, warm_up=100)
    model.learn_many(X[:500], y[:500])
    nbytes = model.nbytes
    model.learn_many(X[500:], y[500:])
    assert (model._size <= 63).all() and (model._size == 63).all()
    assert model.n_nodes <= 4 * 63 and model.nbytes == nbytes  # preallocated: no growth with records
    assert (model._count[:, 0] == 3000).all()  # every tree's root counts every record
    leaves = model._child[:, :, 0] < 0
    for t in range(4):  # the leaves used partition the records
        used = leaves[t, : model._size[t]]
        assert model._count[t, : model._size[t]][used].sum() == 3000
    assert model.nbytes > 4 * 63 * (4 * 2 * 2)  # boxes, counts and the rest counted


def _tree_probabilities(model: MondrianForest, t: int, codes: np.ndarray, k: int) -> np.ndarray:
    """Tree t's probabilities of a record's `codes`, by the formula from its nodes: the root's class
    counts under a Dirichlet prior of 1/2, then each node's down the record's path under its parent's
    probabilities weighted `SMOOTHING`."""
    counts, count, child = model._counts[t, :, :k], model._count[t], model._child[t]
    node = 0
    p = (counts[node] + 0.5) / (count[node] + 0.5 * k)
    while child[node, 0] >= 0:
        left = codes[model._feature[t, node]] <= model._threshold[t, node]
        node = child[node, 0] if left else child[node, 1]
        p = (counts[node] + mondrian.SMOOTHING * p) / (count[node] + mondrian.SMOOTHING)
    return p


def test_each_tree_smooths_its_leaf_s_counts_towards_its_ancestors() -> None:
    """Catches probabilities from the leaf's counts alone (a young leaf's one record, or none, taken
    at face value), or smoothed towards anything but the path's nodes."""
    model = MondrianForest(**SMALL)
    model.learn_many(_RECORDS, _LABELS)
    probes = _RECORDS[::7]
    codes = model._encode(probes, np.zeros(len(probes), dtype=bool))
    k = len(model.classes_)
    for row, x in zip(model.predict_proba_many(probes), codes, strict=True):
        trees = [_tree_probabilities(model, t, x, k) for t in range(model.trees)]
        assert row == pytest.approx(np.mean(trees, axis=0), rel=1e-12, abs=1e-15)


def test_a_checkerboard_of_a_thousand_records_is_learned() -> None:
    pairs = list(stress.checkerboard(1000))
    model = MondrianForest()
    proba = model.predict_learn_many([x for x, _ in pairs], [y for _, y in pairs])
    predicted = np.array(model.classes_)[proba.argmax(axis=1)]
    truth = np.array([y for _, y in pairs])
    accuracy = float(((predicted == truth) & (proba.sum(axis=1) > 0)).mean())
    assert accuracy >= 0.85, accuracy


def test_the_order_of_a_record_s_keys_does_not_matter() -> None:
    shuffled = []
    order = random.Random(1)
    for x in _RECORDS:
        items = list(x.items())
        order.shuffle(items)
        shuffled.append(dict(items))
    model = MondrianForest(**SMALL)
    model.learn_many(shuffled, _LABELS)
    assert model.to_bytes() == _LOOP[1]


def test_a_bad_record_or_label_changes_nothing() -> None:
    model = MondrianForest(**SMALL)
    model.learn_many(_RECORDS[:100], _LABELS[:100])
    before = model.to_bytes()
    with pytest.raises(ValueError, match="class label"):
        model.learn_many(_RECORDS[100:110], [*_LABELS[100:109], [1]])
    with pytest.raises(ValueError):
        model.learn_many([*_RECORDS[100:109], {"a": "not a number"}], _LABELS[100:110])
    assert model.to_bytes() == before


def test_records_keyed_by_integers_are_learned_one_at_a_time() -> None:
    """One record at a time takes any hashable names, as sgt's models' `learn_one` does (River's
    generators key features by integers); a bad label then registers none of them."""
    model = MondrianForest(**SMALL)
    with pytest.raises(ValueError, match="class label"):
        model.learn_one({0: 1.0, 1: 2.0}, [1])
    assert model._space.names == []
    for x, label in zip(_RECORDS[:200], _LABELS[:200], strict=True):
        model.learn_one(dict(enumerate(x.values())), label)
    assert sorted(model._space.names) == list(range(len(_RECORDS[0])))
    assert set(model.predict_proba_one(dict(enumerate(_RECORDS[0].values())))) == set(model.classes_)


@pytest.mark.parametrize("setting", ["trees", "max_nodes"])
def test_a_bad_setting_is_named(setting: str) -> None:
    with pytest.raises(ValueError, match=setting):
        MondrianForest(**{setting: 0})


def test_a_save_whose_nodes_do_not_fit_together_is_refused() -> None:
    model = MondrianForest(**SMALL)
    model.learn_many(_RECORDS[:200], _LABELS[:200])
    saved = decode(model.to_bytes())
    child = saved.arrays["child"].copy()
    child[0, 0, 0] = 10_000  # a child beyond the tree
    arrays = [(name, child if name == "child" else a) for name, a in saved.arrays.items()]
    with pytest.raises(SerializationError):
        MondrianForest.from_bytes(encode(saved.header, arrays))
    with pytest.raises(SerializationError, match="not a MondrianForest"):
        MondrianForest.from_bytes(encode({**saved.header, "model": "Other"}, list(saved.arrays.items())))
