"""Hierarchical smoothing of the classifier's probabilities (``proba="hgs"`` and ``"blend"``).

- the formula on a hand-set tree, exactly, on both the one-record and the batch path, and the
  gradient a learned record leaves on its ancestors' weights;
- the committee's combination of its trees, and the weights' steps at fixed record counts;
- what the smoothing is for: the first records' probabilities follow the class frequencies, and a
  short stream's log loss is lower than the trees' own;
- exactness: any batching and any method give the same bytes and the same prequential probabilities;
  a model saved anywhere continues identically, and predicting changes nothing (these for
  ``proba="calibrated"`` and, the last two, ``proba="mixed"`` too, whose other tests are in
  test_calibration.py and test_bayes.py);
- models saved before smoothing existed still load, and go on as ``proba="tree"``.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sgt
from sgt import SerializationError, SGTClassifier
from sgt.smoothing import ALPHA_INIT, STEP
from tests.floats import assert_within_ulps
from tests.sgt.sgt_testkit import as_dicts, multiclass_stream, threshold_stream

DATA = Path(__file__).parent / "data"
PROPERTY = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_proba_must_be_one_of_the_modes() -> None:
    with pytest.raises(
        ValueError,
        match="proba must be one of 'calibrated', 'mixed', 'blend', 'hgs', 'tree', got 'smooth'",
    ):
        SGTClassifier(proba="smooth")
    assert SGTClassifier().get_params()["proba"] == "calibrated"


# -- the formula ----------------------------------------------------------------------------------


def _one_split(proba: str) -> SGTClassifier:
    """A binary model whose tree is a root split on x0 into two leaves (nodes 1: x0 low, 2: x0 high)."""
    X, y = threshold_stream(200, seed=7)
    model = SGTClassifier(proba=proba, grace_period=20, warm_up=20, max_depth=1)
    model.learn_many(X, [int(v) for v in y])
    tree = model.to_dict()["trees"][0]
    assert (tree["feature"], model.n_nodes) == ("x0", 3)
    return model


def _hand_set(model: SGTClassifier) -> None:
    """Counts and weights chosen so that Eq. 4 gives round numbers:
    prior [1, 1] alpha 1; root [6, 2] alpha 2; left leaf [5, 0]; right leaf [1, 2]."""
    smoother = model._smoother
    smoother.sync(model._trees, 2)
    state = smoother.trees[0]
    state.use_arrays()
    state.counts = np.array([[1, 1], [6, 2], [5, 0], [1, 2]], dtype=np.int64)
    state.alpha = np.array([1.0, 2.0, ALPHA_INIT, ALPHA_INIT])
    state.grad[:] = 0.0
    smoother.n_learned = 1  # far from a step
    smoother._cache = None


LOW, HIGH = {"x0": 0.1, "x1": 500.0}, {"x0": 0.9, "x1": 500.0}


def test_the_smoothed_estimate_follows_the_papers_formula_exactly() -> None:
    model = _one_split("hgs")
    _hand_set(model)
    first, second = model.classes_
    # left: (5 + 1 * 1/2 + 2 * 6/8, 0 + 1 * 1/2 + 2 * 2/8) / (5 + 1 + 2) = (7, 1) / 8
    assert model.predict_proba_one(LOW) == {first: 0.875, second: 0.125}
    # right: (1 + 1/2 + 3/2, 2 + 1/2 + 1/2) / (3 + 3) = (3, 3) / 6
    assert model.predict_proba_one(HIGH) == {first: 0.5, second: 0.5}
    # the batch path: the same numbers; and a leaf without counts is its ancestors' mix
    assert model.predict_proba_many([LOW, HIGH]).tolist() == [[0.875, 0.125], [0.5, 0.5]]
    state = model._smoother.trees[0]
    state.use_arrays()
    state.counts[3] = 0
    model._smoother._cache = None  # (learning changes its key; a hand edit does not)
    assert model.predict_proba_one(HIGH) == {first: (0.5 + 1.5) / 3, second: (0.5 + 0.5) / 3}


def test_a_learned_record_adds_its_log_loss_gradient_to_its_ancestors_and_counts_along_its_path() -> None:
    model = _one_split("hgs")
    _hand_set(model)
    first = model.classes_[0]
    model.learn_one(LOW, first)
    state = model._smoother.trees[0]
    state.use_arrays()
    # theta = 7/8 and its numerator 7; d loss / d log alpha_p = alpha_p (theta - theta_p) / 7
    assert state.grad[:2].tolist() == [1.0 * (0.875 - 0.5) / 7.0, 2.0 * (0.875 - 0.75) / 7.0]
    assert state.counts.tolist() == [[1, 1], [7, 2], [6, 0], [1, 2]]


def test_the_blend_weighs_the_trees_estimate_against_the_counts_evidence() -> None:
    model = _one_split("blend")
    _hand_set(model)
    model._smoother.log_beta = math.log(8.0)
    beta = math.exp(math.log(8.0))
    tree = SGTClassifier.from_bytes(model.to_bytes())
    tree.proba, tree._smoother = "tree", None
    q = tree.predict_proba_one(LOW)[model.classes_[0]]
    # evidence n_leaf + alphas = 8, beta about 8: about the mean of 7/8 and the trees' own estimate
    assert model.predict_proba_one(LOW)[model.classes_[0]] == (8.0 * 0.875 + beta * q) / (8.0 + beta)


def test_the_committee_combines_its_trees_as_independent_evidence() -> None:
    X, y = multiclass_stream(60, seed=4)
    # three classes: two trees, each a root
    model = SGTClassifier(proba="hgs", grace_period=1000, grace_start=1000, leaf_bayes=False)
    model.learn_many(X, [int(v) for v in y])
    counts = model._smoother.class_counts
    n = sum(counts)
    # every tree is its root: theta_k = (n_k + 1/3) / (n + 1), prior pi_k = (n_k + 1) / (n + 3)
    theta = [(c + 1 / 3) / (n + 1) for c in counts]
    prior = [(c + 1) / (n + 3) for c in counts]
    expected = [t * t / p for t, p in zip(theta, prior, strict=True)]
    got = model.predict_proba_one({"x0": 0.5, "x1": 0.5})
    assert [got[c] for c in model.classes_] == pytest.approx([e / sum(expected) for e in expected], rel=1e-12)


def test_the_weights_step_every_step_records_and_only_then() -> None:
    X, y = threshold_stream(3 * STEP, seed=8)
    labels = [int(v) for v in y]
    model = SGTClassifier(proba="hgs", grace_period=20, warm_up=20)
    model.learn_many(X[: STEP - 1], labels[: STEP - 1])
    state = model._smoother.trees[0]
    state.use_arrays()
    assert (state.alpha == ALPHA_INIT).all() and state.grad.any()
    model.learn_one(X[STEP - 1], labels[STEP - 1])
    state.use_arrays()
    assert (state.alpha[state.internal] != ALPHA_INIT).all()
    assert not state.grad.any()


# -- what it is for -------------------------------------------------------------------------------


def test_the_first_records_probabilities_follow_the_class_frequencies() -> None:
    labels = ["a", "a", "b", "a", "a", "a", "b", "a"]
    records = [{"x": float(i)} for i in range(len(labels))]
    smoothed, tree, blend = (SGTClassifier(proba=p) for p in ("hgs", "tree", "blend"))
    for model in (smoothed, tree, blend):
        model.learn_many(records, labels)
    # the root alone, with the uniform prior at weight 1: (6 + 1/2) / (8 + 1)
    assert smoothed.predict_proba_one({"x": 3.0}) == {"a": 6.5 / 9.0, "b": 2.5 / 9.0}
    assert tree.predict_proba_one({"x": 3.0}) == {"a": 0.5, "b": 0.5}  # no attempt yet
    assert 0.5 < blend.predict_proba_one({"x": 3.0})["a"] < 6.5 / 9.0


def _log_loss(model: SGTClassifier, X: np.ndarray, y: list) -> float:
    proba = model.predict_learn_many(X, y)
    index = [model.classes_.index(v) for v in y]
    return float(-np.log(np.clip(proba[np.arange(len(y)), index], 1e-15, 1.0)).mean())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_smoothing_lowers_the_log_loss_of_a_short_stream(seed: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, (1500, 3))
    y = [int(v) for v in (X[:, 0] + 0.4 * X[:, 1] + rng.normal(0.0, 0.15, 1500) > 0.9)]  # 30 % ones
    # the trees of the release before smoothing (constant leaves, constant blocks)
    old_trees = {"warm_up": 100, "grace_start": 100, "leaf_model": "constant"}
    losses = {p: _log_loss(SGTClassifier(proba=p, **old_trees), X, y) for p in ("tree", "hgs", "blend")}
    assert losses["hgs"] < losses["tree"] and losses["blend"] < losses["tree"], losses


# -- exactness ------------------------------------------------------------------------------------

N = 900


@functools.cache
def _stream() -> tuple[list[dict], list]:
    """Three classes, the third first seen at record 300; nominal and missing values; some rows only
    predicted (label None)."""
    X, y = multiclass_stream(N, seed=12)
    rng = np.random.default_rng(13)
    records, labels = [], []
    for i, (row, label) in enumerate(zip(as_dicts(X), y.tolist(), strict=True)):
        row["colour"] = str(rng.choice(["red", "green", "blue"]))
        if rng.uniform() < 0.1:
            del row["x1"]
        records.append(row)
        labels.append(None if rng.uniform() < 0.05 else f"c{min(label, 1) if i < 300 else label}")
    return records, labels


def _small(proba: str) -> SGTClassifier:
    # (without the leaves' naive Bayes, which the formats before these modes did not have either)
    return SGTClassifier(proba=proba, grace_period=30, warm_up=40, nominal=["colour"], leaf_bayes=False)


@functools.cache
def _loop(proba: str) -> tuple[list[dict], bytes]:
    model = _small(proba)
    out = []
    for x, y in zip(*_stream(), strict=True):
        out.append(model.predict_proba_one(x))
        if y is not None:
            model.learn_one(x, y)
    return out, model.to_bytes()


def run_rows(
    model: SGTClassifier, records: list, labels: list, expected: list, rows: range, method: str
) -> None:
    """Run ``rows`` of the stream through ``model`` by ``method`` ("loop": one record at a time,
    "learn_many", or "predict_learn_many"), checking every predicted row against the loop's
    ``expected`` probabilities (a class absent from an expected row must be predicted 0)."""
    a, b = rows.start, rows.stop
    if method == "loop":
        for i in rows:
            assert model.predict_proba_one(records[i]) == expected[i]
            if labels[i] is not None:
                model.learn_one(records[i], labels[i])
        return
    if method == "learn_many":
        model.learn_many(records[a:b], labels[a:b])
        return
    proba_rows = model.predict_learn_many(records[a:b], labels[a:b])
    for i, row in enumerate(proba_rows):
        want = expected[a + i]
        got = {c: row[j] for j, c in enumerate(model.classes_) if c in want or row[j] != 0.0}
        assert got == want


def _cuts(n: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(1, n - 1), max_size=10, unique=True).map(sorted)


@pytest.mark.parametrize("proba", ["hgs", "blend", "calibrated"])
@PROPERTY
@given(
    cuts=_cuts(N),
    methods=st.lists(st.sampled_from(["predict_learn_many", "learn_many", "loop"]), min_size=11),
)
def test_any_batching_gives_the_loops_bytes_and_probabilities(
    proba: str, cuts: list[int], methods: list
) -> None:
    records, labels = _stream()
    expected, blob = _loop(proba)
    model = _small(proba)
    for (a, b), method in zip(itertools.pairwise([0, *cuts, N]), methods, strict=False):
        run_rows(model, records, labels, expected, range(a, b), method)
    assert model.to_bytes() == blob


@pytest.mark.parametrize("proba", ["hgs", "blend", "mixed", "calibrated"])
@PROPERTY
@given(cut=st.integers(0, N), small=st.integers(1, 16))
def test_a_model_saved_anywhere_continues_identically(proba: str, cut: int, small: int) -> None:
    records, labels = _stream()
    model = _small(proba)
    model.learn_many(records[:cut], labels[:cut])
    restored = SGTClassifier.from_bytes(model.to_bytes())
    assert restored.to_bytes() == model.to_bytes()
    rest = slice(cut, min(N, cut + 200))
    for m in (model, restored):  # a few rows (the one-record path), then a chunked batch
        m.predict_learn_many(records[rest][:small], labels[rest][:small])
    ours, theirs = (
        m.predict_learn_many(records[rest][small:], labels[rest][small:]) for m in (model, restored)
    )
    assert np.array_equal(ours, theirs)
    assert restored.to_bytes() == model.to_bytes()


@pytest.mark.parametrize("proba", ["blend", "mixed", "calibrated"])
def test_predicting_does_not_change_the_bytes(proba: str) -> None:
    records, labels = _stream()
    a, b = _small(proba), _small(proba)
    for m in (a, b):
        m.learn_many(records[:500], labels[:500])
    b.predict_proba_many(records[500:600])
    b.predict_one(records[600])
    assert a.to_bytes() == b.to_bytes()


# -- models saved before smoothing ----------------------------------------------------------------

# written by the release before smoothing: SGTClassifier(grace_period=50, warm_up=100) after
# multiclass_stream(700, seed=90) labelled "c0".."c2"; the probabilities it gave for PROBES
PROBES = [{"x0": 0.1, "x1": 0.5}, {"x0": 0.5, "x1": 0.2}, {"x0": 0.9, "x1": 0.9}]
BEFORE = [
    {"c1": 0.030122281041492803, "c2": 0.003992077376886144, "c0": 0.965885641581621},
    {"c1": 0.8915896895651807, "c2": 0.05348565560911978, "c0": 0.05492465482569947},
    {"c1": 0.029259058432392737, "c2": 0.9665170670758052, "c0": 0.004223874491802012},
]


def _assert_probabilities_as_before(model: SGTClassifier) -> None:
    """The probabilities of PROBES: the same classes, each within a few ulps of the figure another machine
    wrote (tests/floats.py)."""
    got = [model.predict_proba_one(x) for x in PROBES]
    assert [sorted(p) for p in got] == [sorted(p) for p in BEFORE]
    assert_within_ulps([[p[c] for c in sorted(p)] for p in got], [[p[c] for c in sorted(p)] for p in BEFORE])


def test_a_model_saved_before_smoothing_loads_and_goes_on_with_the_trees_probabilities() -> None:
    blob = (DATA / "classifier-before-smoothing.sgt").read_bytes()
    model = sgt.load(blob)
    assert model.proba == "tree" and model.get_params()["proba"] == "tree"
    _assert_probabilities_as_before(model)
    again = SGTClassifier.from_bytes(model.to_bytes())  # saved in the current format (blocks added)
    _assert_probabilities_as_before(again)
    X, y = multiclass_stream(300, seed=91)
    for m in (model, again):
        m.learn_many(as_dicts(X), [f"c{v}" for v in y])
    assert again.to_bytes() == model.to_bytes()


@pytest.mark.parametrize("proba", ["mixed", "calibrated"])
def test_a_blob_without_the_modes_state_restores_as_the_trees_alone_and_goes_on_as_they_do(
    proba: str,
) -> None:
    """A model saved before the mode existed (its state left out) is the trees' softmax, byte for byte."""
    records, labels = _stream()
    tree, model = _small("tree"), _small(proba)
    for m in (tree, model):
        m.learn_many(records[:400], labels[:400])
    old = sgt.load(without_probability_state(model.to_bytes()))
    assert old.proba == "tree" and old.get_params()["proba"] == "tree"
    assert old.to_bytes() == tree.to_bytes()  # the trees learn the same in every mode
    for m in (old, tree):
        m.learn_many(records[400:], labels[400:])
    assert old.to_bytes() == tree.to_bytes()
    restored = sgt.load(tree.to_bytes())  # a "tree" model (or an earlier release's) stays "tree"
    assert restored.proba == "tree" and restored.to_bytes() == tree.to_bytes()


def without_probability_state(blob: bytes) -> bytes:
    """The blob as a release before the probability modes wrote it: no proba parameter, no smoothing or
    naive Bayes or calibration state (shared with test_bayes and test_calibration)."""
    from tests.sgt.test_serialization import _pack, _unpack

    version, header, payloads = _unpack(blob)
    header["params"].pop("proba", None)
    header["extra"].pop("smoothing", None)
    header["extra"].pop("bayes", None)
    header["extra"].pop("calibration", None)
    kept = [
        (entry, p)
        for entry, p in zip(header["arrays"], payloads, strict=True)
        if not entry[0].startswith("extra.")
    ]
    header["arrays"] = [entry for entry, _ in kept]
    return _pack(version, header, [p for _, p in kept])


def test_a_blob_without_smoothing_state_restores_as_the_trees_alone() -> None:
    tree = _small("tree")
    records, labels = _stream()
    tree.learn_many(records[:400], labels[:400])
    old = sgt.load(without_probability_state(_small("blend").to_bytes()))
    assert old.proba == "tree"
    assert without_probability_state(tree.to_bytes()) == tree.to_bytes()  # "tree" writes the earlier format
    restored = sgt.load(tree.to_bytes())
    assert restored.proba == "tree" and restored.to_bytes() == tree.to_bytes()


def test_forged_smoothing_arrays_are_refused() -> None:
    from tests.sgt.test_serialization import _forge

    model = _one_split("blend")
    blob = model.to_bytes()
    with pytest.raises(SerializationError, match="smoothing counts"):
        sgt.load(_forge(blob, "extra.s0.counts", lambda v: v.__setitem__((0, 0), 5)))
    header = json.loads(blob[14 : 14 + int.from_bytes(blob[10:14], "little")])
    assert ["extra.s0.counts", "<i8", [4, 2]] in header["arrays"]
