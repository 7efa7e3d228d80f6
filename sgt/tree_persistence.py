"""A tree's state as named arrays for sgt's format (sgt.serialization), and back, checked.

Only the live part of each array is written (no spare capacity, no stale pending rows). A leaf's split
statistics are mostly empty bins, so they are stored sparsely from format 2 on: the flat indices of
the (slot, column) rows that hold any non-zero bit and those rows; every other row is +0.0, which
restores the same bits (see docs/decisions.md, "Trees in memory"). Format 1 stored them densely; formats
1 and 2 had no per-slot block sizes (every block was a grace period). A restored structure is checked
so that routing cannot loop or index out of range, whatever a corrupted blob with a valid checksum
holds.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from sgt.serialization import NamedArray, SerializationError, expect_shape
from sgt.stats import WIDTH

if TYPE_CHECKING:
    from sgt.tree import Tree

__all__ = ["restore", "saved"]

#: the per-node arrays, indexed by node id
NODE_ARRAYS = (
    "feature",
    "threshold",
    "left",
    "right",
    "table",
    "missing",
    "value",
    "depth",
    "parent",
    "slot",
)
#: an adaptive tree's per-node arrays (see sgt.linear_term.LinearTermSteps._choose)
ADAPTIVE_ARRAYS = ("anchor", "tally", "serving")
INITIAL_PENDING_ROWS = 64


def saved(tree: Tree, prefix: str) -> tuple[dict[str, Any], list[NamedArray]]:
    """The tree's counters and its arrays (named ``<prefix>.<array>``) for sgt's format."""
    n, s = tree.n_nodes, tree.n_slots
    counters = {
        "n_nodes": n,
        "n_slots": s,
        "n_splits": tree.n_splits,
        "n_updates": tree.n_updates,
        "n_tables": len(tree.tables),
    }
    pending = tree.pending_n[:s]

    def live(rows: np.ndarray) -> np.ndarray:  # each slot's pending rows, back to back
        return np.concatenate([rows[k, : pending[k]] for k in range(s)])

    out = [(f"{prefix}.{name}", getattr(tree, name)[:n]) for name in NODE_ARRAYS]
    out += [
        (f"{prefix}.slot_node", tree.slot_node[:s]),
        *_sparse_stats(prefix, tree.stats, tree.layout.n_columns * math.prod(tree.output_axes())),
        (f"{prefix}.total", tree.total[:s]),
        (f"{prefix}.pending_n", pending),
        (f"{prefix}.block", tree.block[:s]),
        (
            f"{prefix}.pending_codes",
            np.concatenate([tree.pending_codes[k, : pending[k]] for k in range(s)]),
        ),
        (f"{prefix}.pending_g", np.concatenate([tree.pending_g[k, : pending[k]] for k in range(s)])),
        (f"{prefix}.pending_h", np.concatenate([tree.pending_h[k, : pending[k]] for k in range(s)])),
    ]
    out += [(f"{prefix}.tables.{k}", table) for k, table in enumerate(tree.tables)]
    if tree.linear:
        out.append((f"{prefix}.weights", tree.weights[:n]))
    if tree.adaptive:
        out += [(f"{prefix}.{name}", getattr(tree, name)[:n]) for name in ADAPTIVE_ARRAYS]
    if tree.cap is not None:  # (unbounded: the bytes of the format before the budget)
        active = tree.active[:s].astype(np.int32)  # (the format holds no booleans)
        out += [(f"{prefix}.active", active), (f"{prefix}.promise", tree.promise[:s])]
    return counters, out


def restore(tree: Tree, prefix: str, counters: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Fill `tree`, fresh from its constructor, with the state `saved` wrote, checked so that routing
    can walk it (SerializationError if not)."""
    layout = tree.layout
    out = tree.output_axes()
    n, s = int(counters["n_nodes"]), int(counters["n_slots"])
    for name in NODE_ARRAYS:
        shape = (n, *out) if name == "value" else (n,)
        values = expect_shape(f"{prefix}.{name}", arrays[f"{prefix}.{name}"], shape)
        setattr(tree, name, values.astype(getattr(tree, name).dtype))
    tree.n_nodes, tree.n_slots = n, s
    tree.n_splits, tree.n_updates = int(counters["n_splits"]), int(counters["n_updates"])
    tree.slot_node = arrays[f"{prefix}.slot_node"].astype(np.int32)
    tree.stats = _slot_stats(prefix, arrays, (s, layout.n_columns, *out))
    tree.total = arrays[f"{prefix}.total"].reshape(s, *out, WIDTH)
    _load_budget(tree, prefix, arrays)
    _load_pending(tree, prefix, arrays)
    tree.tables = [arrays[f"{prefix}.tables.{k}"].astype(np.int32) for k in range(int(counters["n_tables"]))]
    if tree.linear:
        shape = (n, *out, layout.n_features)
        tree.weights = np.zeros(shape)
        if f"{prefix}.weights" in arrays:  # (absent: written with constant leaves)
            weights = arrays[f"{prefix}.weights"]
            if weights.shape != shape:
                raise SerializationError(f"{prefix}: weights of shape {weights.shape}, not {shape}")
            tree.weights = weights.astype(np.float64)
    if tree.adaptive:  # (absent: written with another leaf model; every leaf then starts at 0)
        for name in ADAPTIVE_ARRAYS:
            saved = arrays.get(f"{prefix}.{name}")
            values = np.zeros(n) if saved is None else expect_shape(f"{prefix}.{name}", saved, (n,))
            setattr(tree, name, values.astype(getattr(tree, name).dtype))
    _check_structure(prefix, tree)


def _load_budget(tree: Tree, prefix: str, arrays: dict[str, np.ndarray]) -> None:
    """The slots' activity and promise, as saved (absent: saved without a budget, all active)."""
    s = tree.n_slots
    tree.active = np.ones(s, dtype=bool)
    tree.promise = np.full(s, math.inf)
    if f"{prefix}.active" not in arrays:
        return
    active = expect_shape(f"{prefix}.active", arrays[f"{prefix}.active"], (s,))
    if not np.isin(active, (0, 1)).all():
        raise SerializationError(f"{prefix}: slot activity other than 0 and 1")
    tree.active = active.astype(bool)
    tree.promise = expect_shape(f"{prefix}.promise", arrays[f"{prefix}.promise"], (s,)).astype(np.float64)
    for slot in np.flatnonzero(~tree.active).tolist():
        if tree.stats[slot].any():
            raise SerializationError(f"{prefix}: an inactive slot holds statistics")
        tree.stats[slot] = tree.no_stats()


def _load_pending(tree: Tree, prefix: str, arrays: dict[str, np.ndarray]) -> None:
    """The slots' block sizes and pending blocks, from `saved`'s arrays (after the slot count)."""
    s, grace, n_features = tree.n_slots, tree.pending_limit(), tree.layout.n_features
    tree.pending_n = arrays[f"{prefix}.pending_n"].astype(np.int64).reshape(s)
    if f"{prefix}.block" in arrays:
        tree.block = arrays[f"{prefix}.block"].astype(np.int64).reshape(s)
    else:  # formats 1 and 2: every block was a grace period
        tree.block = np.full(s, tree.params.grace_period, dtype=np.int64)
    if (tree.block < 1).any() or (tree.block > grace).any():
        raise SerializationError(f"{prefix}: block sizes out of range")
    if (tree.pending_n < 0).any() or (tree.pending_n >= tree.block).any():
        raise SerializationError(f"{prefix}: pending block sizes out of range")
    # [pending instances, features], as written; checked as such rather than reshaped, because a
    # tree that knows no features yet has zero columns, whose row count a reshape cannot infer
    codes = arrays[f"{prefix}.pending_codes"]
    g, h = arrays[f"{prefix}.pending_g"], arrays[f"{prefix}.pending_h"]
    if codes.ndim != 2 or codes.shape[1] != n_features:
        raise SerializationError(f"{prefix}: pending codes have shape {codes.shape}, not [n, {n_features}]")
    out = tree.output_axes()
    count = int(tree.pending_n.sum())
    if not (codes.shape[0] == count and g.shape == h.shape == (count, *out)):
        raise SerializationError(f"{prefix}: pending blocks disagree in size")
    rows = min(grace, max(INITIAL_PENDING_ROWS, int(tree.pending_n.max(initial=0))))
    tree.pending_codes = np.zeros((s, rows, n_features), dtype=codes.dtype)
    tree.pending_g = np.zeros((s, rows, *out))
    tree.pending_h = np.zeros((s, rows, *out))
    ends = np.cumsum(tree.pending_n)
    for k in range(s):
        size = int(tree.pending_n[k])
        block = slice(int(ends[k]) - size, int(ends[k]))
        tree.pending_codes[k, :size] = codes[block]
        tree.pending_g[k, :size] = g[block]
        tree.pending_h[k, :size] = h[block]


def _sparse_stats(prefix: str, stats: list[np.ndarray], per_slot: int) -> list[NamedArray]:
    """The rows of the slots' statistics (each slot's viewed as [rows, 6], `per_slot` rows a slot,
    slot after slot) that hold any non-zero bit, and their flat indices (an inactive slot has none).

    Bitwise, so a -0.0 is kept and everything left out is exactly +0.0.
    """
    width = np.int32 if len(stats) * per_slot < 2**31 else np.int64  # 4 bytes an index whenever they fit
    indices, kept = [np.empty(0, dtype=width)], [np.empty((0, WIDTH))]
    for slot, held in enumerate(stats):
        rows = held.reshape(-1, WIDTH)
        found = np.flatnonzero(rows.view(np.uint64).any(axis=1))
        indices.append((found + slot * per_slot).astype(width))
        kept.append(rows[found])
    return [
        (f"{prefix}.stats_index", np.concatenate(indices)),
        (f"{prefix}.stats_rows", np.concatenate(kept)),
    ]


def _slot_stats(prefix: str, arrays: dict[str, np.ndarray], shape: tuple[int, ...]) -> list[np.ndarray]:
    """Each slot's [columns, (outputs,) 6] statistics of a tree from either format, each an array of
    its own (as a learning tree's are: none keeps another's memory alive), checked against its layout
    (`shape`: all but the last axis, slots first)."""
    if f"{prefix}.stats" in arrays:  # format 1
        return [np.array(held) for held in arrays[f"{prefix}.stats"].reshape(*shape, WIDTH)]
    index = arrays[f"{prefix}.stats_index"]
    values = arrays[f"{prefix}.stats_rows"]
    slots, per_slot = shape[0], math.prod(shape[1:])
    if index.ndim != 1 or values.shape != (index.size, WIDTH):
        raise SerializationError(f"{prefix}: sparse statistics disagree in size")
    if index.size and (index[0] < 0 or index[-1] >= slots * per_slot or (np.diff(index) <= 0).any()):
        raise SerializationError(f"{prefix}: sparse statistics index out of order or range")
    bounds = np.searchsorted(index, np.arange(slots + 1) * per_slot).tolist()
    out = []
    for slot in range(slots):
        held = np.zeros((per_slot, WIDTH))  # (only the rows written take memory: see the module)
        lo, hi = bounds[slot], bounds[slot + 1]
        held[index[lo:hi] - slot * per_slot] = values[lo:hi]
        out.append(held.reshape(*shape[1:], WIDTH))
    return out


def _check_structure(prefix: str, tree: Tree) -> None:
    """Reject structures that routing could not walk safely (corruption behind a valid checksum).

    Children are always created after their parent, so every child id must exceed its parent's
    and name it as parent: that rules out cycles. Missing values must go to one of the children.
    """
    n = tree.n_nodes
    if n < 1 or tree.n_slots < 1:
        raise SerializationError(f"{prefix}: empty tree")
    for node in range(n):
        feature = int(tree.feature[node])
        if feature < 0:
            slot = int(tree.slot[node])
            if not 0 <= slot < tree.n_slots or int(tree.slot_node[slot]) != node:
                raise SerializationError(f"{prefix}: leaf {node} has an invalid slot")
            continue
        if feature >= tree.layout.n_features:
            raise SerializationError(f"{prefix}: node {node} splits on an unknown feature")
        table = int(tree.table[node])
        if table >= len(tree.tables):
            raise SerializationError(f"{prefix}: node {node} names a missing category table")
        if table >= 0:
            children = [int(c) for c in tree.tables[table] if c >= 0]
        else:
            children = [int(tree.left[node]), int(tree.right[node])]
        for child in children:
            if not node < child < n or int(tree.parent[child]) != node:
                raise SerializationError(f"{prefix}: node {node} has an invalid child {child}")
        if int(tree.missing[node]) not in children:
            raise SerializationError(
                f"{prefix}: node {node} sends missing values to a node that is not its child"
            )
