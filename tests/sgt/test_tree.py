"""Tree internals the estimators' tests reach only indirectly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt.features import FeatureSpace
from sgt.tree import FIRST_FULL_WINDOW, Layout, Params, Tree


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
