"""A Mondrian forest's rows: sgt.boosted.mondrian's walk of each row through every tree (its
probabilities before learning it, then the learning), the one walk of the model, compiled with the
kernels and run as Python without them (`sgt.kernels.compiling.plain`: no compiled code runs then).

Both forms run the same lines and give the same integers and floats: as Python, on numpy's scalars,
whose arithmetic on these types is numba's (splitmix64's uint64 wraps silently under the caller's
``np.errstate(over="ignore")``; an extension is a difference of two codes taken only where it is
positive, so the codes' uint16 never wraps). The learning's lines are chosen to be quick as Python
too: no numpy scalar is built per step (converting the codes to int64 to subtract them ran the Python
form at a third of its speed, 1,200 records/s against 3,700 on a checkerboard of 2,000 records, with
8 trees). The probabilities smoothed down each path (`_path_probabilities`) build a few per node of
the path: with 16 trees the Python form runs that checkerboard at 575 records/s, against 1,041 with
each leaf's counts alone (medians of three, process CPU).

Each tree is arrays of nodes preallocated to its bound (sgt.boosted.mondrian.MondrianForest says what
each holds). A record's codes are integers, so a node's box, the record's extension beyond it and the
extensions' sum are integers; the only floats are the split times (an exponential draw divided by
that sum, as `math.log1p`, which numba calls from the same C library as Python) and the
probabilities, each node's a sum, a product and a division of floats (`_path_probabilities`).

The random draws are splitmix64's (sgt.kernels.splitmix) of (seed, record, tree, draw).
"""

from __future__ import annotations

import math

import numpy as np

from sgt.kernels.compiling import compiled
from sgt.kernels.splitmix import GOLDEN, STEP, mix, unit

__all__ = ["mondrian_rows"]

#: the Dirichlet prior of every class's count in a root's probabilities, (count + 1/2) / (n + K/2)
_PRIOR = 0.5


@compiled
def _uniform(key: np.uint64, slot: int) -> float:
    """The uniform [0, 1) number of draw `slot` of a record whose key is `key`."""
    return unit(mix(key + np.uint64(slot + 1) * GOLDEN))


@compiled
def mondrian_rows(
    child: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    time: np.ndarray,
    count: np.ndarray,
    counts: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    size: np.ndarray,
    codes: np.ndarray,
    targets: np.ndarray,
    predict: np.ndarray,
    known: np.ndarray,
    seed: np.uint64,
    first: np.uint64,
    max_nodes: int,
    out: np.ndarray,
    smoothing: float,
) -> None:
    """Row i: if `predict[i]`, its probabilities over the `known[i]` classes known before it, the trees'
    mean of their leaves' (`_path_probabilities` with `smoothing`), into out[i] (zeros while no tree
    has learned a record); then, if `targets[i]` >= 0, every tree learns it (record first, first + 1,
    ... for the learned rows in turn). The arrays are those of sgt.boosted.mondrian.MondrianForest,
    changed in place."""
    trees = child.shape[0]
    width = codes.shape[1]
    path = np.empty(max_nodes, dtype=np.int64)
    extension = np.empty(width, dtype=np.int64)
    proba = np.empty(out.shape[1])  # (a tree's probabilities at the node the walk is at)
    record = first
    for i in range(codes.shape[0]):
        x = codes[i]
        k = known[i]
        y = targets[i]
        key = mix(seed * STEP + record * GOLDEN)
        ready = predict[i] and count[0, 0] > 0  # (every tree learns every record)
        for t in range(trees):
            depth = 0
            node = 0
            while True:
                path[depth] = node
                depth += 1
                left = child[t, node, 0]
                if left < 0:
                    break
                node = left if x[feature[t, node]] <= threshold[t, node] else child[t, node, 1]
            if ready:
                _path_probabilities(t, k, depth, path, count, counts, smoothing, proba)
                for c in range(k):
                    out[i, c] += proba[c]
            if y >= 0:
                _learn(
                    t,
                    x,
                    y,
                    key,
                    depth,
                    path,
                    extension,
                    child,
                    feature,
                    threshold,
                    time,
                    count,
                    counts,
                    lo,
                    hi,
                    size,
                    max_nodes,
                )
        if ready:
            for c in range(k):
                out[i, c] /= trees
        if y >= 0:
            record += np.uint64(1)


@compiled
def _path_probabilities(
    t: int,
    k: int,
    depth: int,
    path: np.ndarray,
    count: np.ndarray,
    counts: np.ndarray,
    smoothing: float,
    proba: np.ndarray,
) -> None:
    """Tree t's probabilities of the `k` classes at the end of its `path` (`depth` nodes, root first)
    into proba[:k]: the root's counts under the Dirichlet prior `_PRIOR`, then each node's counts
    under its parent's probabilities weighted `smoothing`, (counts + smoothing p_parent) / (n +
    smoothing)."""
    root = path[0]
    inverse = 1.0 / (count[t, root] + _PRIOR * k)
    for c in range(k):
        proba[c] = (counts[t, root, c] + _PRIOR) * inverse
    for j in range(1, depth):
        node = path[j]
        inverse = 1.0 / (count[t, node] + smoothing)
        for c in range(k):
            proba[c] = (counts[t, node, c] + smoothing * proba[c]) * inverse


@compiled
def _learn(
    t: int,
    x: np.ndarray,
    y: int,
    key: np.uint64,
    depth: int,
    path: np.ndarray,
    extension: np.ndarray,
    child: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    time: np.ndarray,
    count: np.ndarray,
    counts: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    size: np.ndarray,
    max_nodes: int,
) -> None:
    """Tree t learns record x of class y along its `path` (`depth` nodes, root first): a box it
    extends may split above its content (`_split`), then it takes the record."""
    width = x.shape[0]
    if count[t, 0] == 0:  # the tree's first record: the root's box is the record
        for f in range(width):
            lo[t, 0, f] = x[f]
            hi[t, 0, f] = x[f]
        count[t, 0] = 1
        counts[t, 0, y] = 1
        return
    full = size[t] + 2 > max_nodes  # (a full tree splits no more: its boxes are never read again)
    slot = 3 * max_nodes * t
    for j in range(depth):
        node = path[j]
        total = 0
        if not full:
            for f in range(width):
                v = x[f]
                a = lo[t, node, f]
                b = hi[t, node, f]
                if v < a:  # (each difference is of two codes where it is positive: no wrap)
                    extension[f] = a - v
                elif v > b:
                    extension[f] = v - b
                else:
                    extension[f] = 0
                total += extension[f]
        new_leaf = -1
        if total > 0 and count[t, node] != counts[t, node, y]:
            split_time = 0.0
            split = False
            u = _uniform(key, slot + 3 * j)
            if child[t, node, 0] < 0:  # a leaf splits whenever a record of another class extends it
                split = True
                split_time = time[t, node] - math.log1p(-u) / total
            else:  # within the gap to its children's time, at an exponential time of rate `total`
                gap = (time[t, child[t, node, 0]] - time[t, node]) * total
                if u < gap:  # (-log(1 - u) >= u: u >= gap never splits; the log only where it may)
                    drawn = -math.log1p(-u)
                    if drawn < gap:
                        split = True
                        split_time = time[t, node] + drawn / total
            if split:
                new_leaf = _split(
                    t,
                    node,
                    x,
                    total,
                    split_time,
                    key,
                    slot + 3 * j,
                    extension,
                    child,
                    feature,
                    threshold,
                    time,
                    count,
                    counts,
                    lo,
                    hi,
                    size,
                )
        if total > 0:
            for f in range(width):
                if x[f] < lo[t, node, f]:
                    lo[t, node, f] = x[f]
                if x[f] > hi[t, node, f]:
                    hi[t, node, f] = x[f]
        count[t, node] += 1
        counts[t, node, y] += 1
        if new_leaf >= 0:  # the new leaf holds the record alone; the walk ends there
            for f in range(width):
                lo[t, new_leaf, f] = x[f]
                hi[t, new_leaf, f] = x[f]
            count[t, new_leaf] = 1
            counts[t, new_leaf, y] = 1
            return


@compiled
def _split(
    t: int,
    node: int,
    x: np.ndarray,
    total: int,
    split_time: float,
    key: np.uint64,
    slot: int,
    extension: np.ndarray,
    child: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    time: np.ndarray,
    count: np.ndarray,
    counts: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    size: np.ndarray,
) -> int:
    """Split `node` of tree t above its content at `split_time`: its content moves to a new node, the
    record's side gets a new empty leaf, and the node tests a feature drawn in proportion to the
    extensions at a threshold drawn uniformly between the box and the record. Returns the new leaf."""
    width = x.shape[0]
    # the feature: the first whose cumulative extension exceeds a uniform draw of [0, total)
    target = min(int(_uniform(key, slot + 1) * total), total - 1)
    f = 0
    cumulative = extension[0]
    while cumulative <= target and f < width - 1:
        f += 1
        cumulative += extension[f]
    right = np.int64(x[f]) > np.int64(hi[t, node, f])
    edge = np.int64(hi[t, node, f]) if right else np.int64(x[f])
    gap = extension[f]  # codes edge, ..., edge + gap - 1 may be the last one left of the threshold
    offset = min(int(_uniform(key, slot + 2) * gap), gap - 1)
    moved = size[t]
    leaf = moved + 1
    size[t] += 2
    child[t, moved] = child[t, node]
    feature[t, moved] = feature[t, node]
    threshold[t, moved] = threshold[t, node]
    time[t, moved] = split_time
    count[t, moved] = count[t, node]
    counts[t, moved] = counts[t, node]
    lo[t, moved] = lo[t, node]
    hi[t, moved] = hi[t, node]
    time[t, leaf] = split_time
    feature[t, node] = f
    threshold[t, node] = edge + offset
    child[t, node, 0] = moved if right else leaf
    child[t, node, 1] = leaf if right else moved
    return leaf
