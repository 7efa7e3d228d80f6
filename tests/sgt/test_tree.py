"""Tree internals the estimators' tests reach only indirectly."""

from __future__ import annotations

from copy import deepcopy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt.features import FeatureSpace
from sgt.leaf import FIRST_FULL_WINDOW
from sgt.multioutput import MultiOutputTree
from sgt.tree import Layout, Params, Tree


def brute_first_full(tree: Tree, nodes: np.ndarray) -> int:
    counts = {int(s): int(tree.pending_n[s]) for s in range(tree.n_slots)}
    for i, node in enumerate(nodes.tolist()):
        slot = int(tree.slot[node])
        counts[slot] += 1
        if counts[slot] == tree.params.grace_period:
            return i
    return nodes.size


@settings(max_examples=60, deadline=None)
@given(
    leaves=st.integers(1, 400),
    length=st.integers(0, 6 * FIRST_FULL_WINDOW),
    grace=st.integers(2, 300),
    seed=st.integers(0, 2**32 - 1),
)
def test_first_full_finds_the_first_instance_that_fills_a_block(leaves, length, grace, seed) -> None:
    """Catches a search that stops at a prefix without a fill, or takes a later fill for the first."""
    rng = np.random.default_rng(seed)
    tree = Tree(Params(1e-3, grace, 0.1, 0.1, None), Layout(FeatureSpace(bins=8, warm_up=10)))
    nodes = [0] + [tree._new_leaf(parent=0, value=0.0, depth=1) for _ in range(leaves - 1)]
    tree.pending_n[: tree.n_slots] = rng.integers(0, grace, size=tree.n_slots)
    routed = rng.choice(np.array(nodes), size=length)
    assert tree.first_full(routed) == brute_first_full(tree, routed)


def test_a_nominal_split_writes_the_same_lookup_table_batched_as_in_a_loop() -> None:
    """Regression: a nominal split sized its lookup table to the layout's width at the split. A batch
    encodes its later rows' categories first (here 'c3', first seen in the last row), so its table was
    wider than the loop's and `to_bytes` differed, though both routed alike. (Found by shrinking random
    streams: 17 rows.)"""
    from sgt import SGTClassifier

    a = [0.8875, 0.2190, 0.1432, 0.0136, 0.1481, 0.1300, 0.0181, 0.8138, 0.1486, 0.5337, 0.1453, 0.3392]
    a += [0.0136, 0.0073, 0.9834, 0.6549, 0.4333]
    c = [1, 0, 0, 0, 1, 2, 2, 2, 2, 1, 0, 0, 0, 2, 2, 0, 3]
    records = [{"a": x, "c": f"c{k}"} for x, k in zip(a, c, strict=True)]
    labels = [1, 0, 1, 1, 1, 0, 0, 1, None, 0, None, 1, None, 1, 0, None, 1]
    params = {"grace_period": 8, "grace_start": 2, "delta": 0.3, "warm_up": 40}
    batch, loop = SGTClassifier(**params), SGTClassifier(**params)
    batch.predict_learn_many(records, labels)
    for x, y in zip(records, labels, strict=True):
        loop.predict_proba_one(x)
        if y is not None:
            loop.learn_one(x, y)
    assert any(t.tables for t in loop._trees)  # a nominal split happened
    assert batch.to_bytes() == loop.to_bytes()


def test_spare_slots_change_neither_the_saved_state_nor_nbytes() -> None:
    """Catches a save or a size that counts the slot arrays' capacity (which grows by doubling) rather
    than the live slots: a tree with spare slots and its restored copy, which has none, must save the
    same arrays and keep doing so as both learn on, and report the same nbytes once their pending
    rows (which nbytes counts as allocated, and a restore allocates as needed) are as long."""
    from sgt import BoostedClassifier, load

    rng = np.random.default_rng(3)
    X = rng.uniform(size=(3000, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=3000) > 0.5).astype(int)
    model = BoostedClassifier()
    model.learn_many(X[:1500], y[:1500])
    # (the members' trees and the single tree's beside them, until it retires)
    singles = [] if model._single is None else model._single._trees
    trees = [tree for member in model._members for tree in member._trees] + singles
    assert any(tree.total.shape[0] > tree.n_slots for tree in trees)  # spare slots exist
    restored = load(model.to_bytes())
    assert (restored._single is None) == (model._single is None)
    copies = [tree for member in restored._members for tree in member._trees]
    copies += [] if restored._single is None else restored._single._trees
    assert all(copy.total.shape[0] == copy.n_slots for copy in copies)
    for tree, copy in zip(trees, copies, strict=True):
        copy.reserve_pending(tree.pending_g.shape[1])
    assert restored.nbytes == model.nbytes
    model.learn_many(X[1500:], y[1500:])
    restored.learn_many(X[1500:], y[1500:])
    assert restored.to_bytes() == model.to_bytes()


def _memory_of(array: np.ndarray) -> int:
    """The id of the buffer `array` lives in (its base's, for a view)."""
    return id(array if array.base is None else array.base)


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "kernels"])
def test_every_slot_owns_its_statistics_after_learning_and_a_restore(compiled, monkeypatch) -> None:
    """Catches slot statistics left as views of one shared array (a restore's dense block, or the
    numpy code's merge of several leaves at once): one live slot would keep every other slot's
    memory alive, past what `nbytes` counts."""
    from sgt import SGTClassifier, kernels, load

    monkeypatch.setattr(kernels, "ENABLED", compiled)
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(4000, 4))
    y = (X[:, 0] + X[:, 1] > 1.0).astype(int)
    model = SGTClassifier()
    model.learn_many(X, y)
    learned, restored = model._trees[0], load(model.to_bytes())._trees[0]
    waiting = np.flatnonzero(learned.pending_n[: learned.n_slots] > 0)
    assert waiting.size > 1
    learned.learner._merge_leaves(waiting)  # several leaves' blocks merged in one pass
    for tree in (learned, restored):
        assert len({_memory_of(held) for held in tree.stats}) == tree.n_slots


@pytest.mark.parametrize("outputs", [1, 3])
def test_a_copied_tree_learns_on_its_own_arrays(outputs: int) -> None:
    """Catches a copy whose learner (sgt.leaf.LeafLearner, which the tree owns) still writes into the
    tree it was copied from: the copy must learn as the original would and leave the original as it was."""
    space = FeatureSpace(bins=8, warm_up=10)
    x = np.random.default_rng(0).uniform(0.0, 1.0, 80)
    codes = space.encode_array(x[:, None], np.ones(80, dtype=bool))
    params, layout = Params(0.1, 20, 0.1, 0.0, None, leaf_model="linear"), Layout(space)
    tree = Tree(params, layout) if outputs == 1 else MultiOutputTree(params, layout, outputs)
    assert tree.learner.tree is tree and type(tree.learner) is tree.learner_type

    def learn(target: Tree, rows: np.ndarray, values: np.ndarray) -> None:
        for value, row in zip(values, rows):
            g = -1.0 if value < 0.5 else 1.0
            target.learn_one(
                target.route_one(row)[0],
                row,
                g if outputs == 1 else [g] * outputs,
                1.0 if outputs == 1 else [1.0] * outputs,
                space,
            )

    learn(tree, codes[:40], x[:40])
    before = tree.saved("t")
    twin = deepcopy(tree)
    assert twin.learner.tree is twin
    learn(twin, codes[40:], x[40:])
    after = tree.saved("t")
    assert before[0] == after[0] and all(np.array_equal(a, b) for (_, a), (_, b) in zip(before[1], after[1]))
    learn(tree, codes[40:], x[40:])
    assert tree.saved("t")[0] == twin.saved("t")[0] and tree.n_splits > 0
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(tree.saved("t")[1], twin.saved("t")[1]))
