"""A tree's row steps, compiled: a linear tree's raw scores, appends to the leaves' pending blocks,
and routing through numeric branches (Tree.predict_rows, Tree.append, Tree.route).
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled

__all__ = ["append_rows", "append_taken", "predict_linear", "route_numeric"]


@compiled
def predict_linear(
    nodes: np.ndarray,
    value: np.ndarray,
    weights: np.ndarray,
    columns: np.ndarray,
    inputs: np.ndarray,
    first: int,
) -> np.ndarray:
    """A linear tree's raw scores [outputs, rows] of rows first, first + 1, ... of `inputs` [rows,
    columns] at `nodes`: each output's value (`value` [nodes, outputs]) plus its weights (`weights`
    [nodes, outputs, features]) of `columns` times the inputs, added feature by feature in order, as
    Tree.predict_rows and MultiOutputTree.predict_outputs sum them (a one-output tree passes its
    arrays with an output axis of 1)."""
    outputs = value.shape[1]
    out = np.empty((outputs, nodes.size))
    for i in range(nodes.size):
        node = nodes[i]
        for k in range(outputs):
            total = value[node, k]
            for j in range(columns.size):
                total += weights[node, k, columns[j]] * inputs[first + i, j]
            out[k, i] = total
    return out


@compiled
def append_rows(
    nodes: np.ndarray,
    codes: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    place: np.ndarray,
    slot: np.ndarray,
    pending_n: np.ndarray,
    pending_codes: np.ndarray,
    pending_g: np.ndarray,
    pending_h: np.ndarray,
) -> bool:
    """Tree.append of one-output instances with their places among the given instances of their leaf:
    each goes to position pending_n + place of its leaf's pending block. False, and nothing written,
    when a position lies beyond the blocks' capacity (the caller reserves room and calls again)."""
    capacity, width = pending_g.shape[1], codes.shape[1]
    for i in range(nodes.size):
        if pending_n[slot[nodes[i]]] + place[i] >= capacity:
            return False
    for i in range(nodes.size):
        leaf = slot[nodes[i]]
        position = pending_n[leaf] + place[i]
        pending_codes[leaf, position, :width] = codes[i]
        pending_g[leaf, position] = g[i]
        pending_h[leaf, position] = h[i]
    for i in range(nodes.size):
        pending_n[slot[nodes[i]]] += 1
    return True


@compiled
def append_taken(
    learned: np.ndarray,
    codes: np.ndarray,
    nodes: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    place: np.ndarray,
    slot: np.ndarray,
    pending_n: np.ndarray,
    pending_codes: np.ndarray,
    pending_g: np.ndarray,
    pending_h: np.ndarray,
) -> bool:
    """`append_rows` of rows `learned` of a run's `codes` (each instance's codes read there, not
    gathered first): sgt.leafwise's append of a pass's learned rows. False, and nothing written,
    when a position lies beyond the blocks' capacity."""
    capacity, width = pending_g.shape[1], codes.shape[1]
    for i in range(nodes.size):
        if pending_n[slot[nodes[i]]] + place[i] >= capacity:
            return False
    for i in range(nodes.size):
        leaf = slot[nodes[i]]
        position = pending_n[leaf] + place[i]
        pending_codes[leaf, position, :width] = codes[learned[i]]
        pending_g[leaf, position] = g[i]
        pending_h[leaf, position] = h[i]
    for i in range(nodes.size):
        pending_n[slot[nodes[i]]] += 1
    return True


@compiled
def route_numeric(
    codes: np.ndarray,
    start: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    missing: np.ndarray,
) -> np.ndarray:
    """Tree.route of a tree without nominal branches: the leaf each row of `codes` reaches from its
    `start` node (code 0, a missing value, takes the branch's missing child; codes up to the threshold
    go left). No row stops on the way: a numeric branch has a child for every code."""
    out = np.empty(start.size, dtype=np.int32)
    for i in range(start.size):
        node = start[i]
        while feature[node] >= 0:
            code = codes[i, feature[node]]
            if code == 0:
                node = missing[node]
            elif code <= threshold[node]:
                node = left[node]
            else:
                node = right[node]
        out[i] = node
    return out
