"""sgt.leafwise's passes, compiled: which rows a pass takes and where its events fall.

`plan_pass` is leafwise._take's ranking, `take_pass` the same with each taken row's prediction (a
one-output tree that is not adaptive: leafwise._take_compiled), and `node_rows_after` and
`next_event` the scans after an event (leafwise._run_events, leafwise._horizon).

`plan_pass` and `take_pass` each spell out the count of a row and its node's event: a compiled helper
that both call per row made them three to eight times slower (numba's call per row, inlined or not).
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled

__all__ = ["next_event", "node_rows_after", "plan_pass", "take_pass"]


@compiled
def plan_pass(
    rows: np.ndarray,
    at: np.ndarray,
    learned: np.ndarray,
    feature: np.ndarray,
    slot: np.ndarray,
    block: np.ndarray,
    pending_n: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """sgt.leafwise's pass over `rows` (ascending, at nodes `at`): which rows it takes, each node's up
    to its next event, as leafwise._take finds them. Returns (the taken rows' indices into `rows`,
    ascending; whether each taken row is at a leaf; each taken row's place among its node's learned
    rows, from 0; the events' rows and nodes, in row order).

    A learned row is its node's event when it is the node's `need`-th learned row of the pass: the
    rest of the leaf's block (block - pending_n of its slot), or the first at a branch (a nominal
    branch's new category). A node's rows after its event wait for the next pass."""
    n = rows.size
    seen = np.zeros(feature.size, dtype=np.int64)  # each node's learned rows so far in the pass
    done = np.zeros(feature.size, dtype=np.bool_)  # whether its event is found (later rows wait)
    taken = np.empty(n, dtype=np.int64)
    leaf = np.empty(n, dtype=np.bool_)
    place = np.empty(n, dtype=np.int64)
    event_rows = np.empty(n, dtype=np.int64)
    event_nodes = np.empty(n, dtype=np.int64)
    n_taken = n_events = 0
    for i in range(n):
        node = at[i]
        if done[node]:
            continue
        count = seen[node]
        is_leaf = feature[node] < 0
        if learned[i]:
            count += 1
            seen[node] = count
            need = block[slot[node]] - pending_n[slot[node]] if is_leaf else 1
            if count == need:
                done[node] = True
                event_rows[n_events], event_nodes[n_events] = rows[i], node
                n_events += 1
        taken[n_taken], leaf[n_taken], place[n_taken] = i, is_leaf, count - 1
        n_taken += 1
    return taken[:n_taken], leaf[:n_taken], place[:n_taken], event_rows[:n_events], event_nodes[:n_events]


@compiled
def take_pass(
    rows: np.ndarray,
    nodes: np.ndarray,
    learn: np.ndarray,
    feature: np.ndarray,
    slot: np.ndarray,
    block: np.ndarray,
    pending_n: np.ndarray,
    value: np.ndarray,
    weights: np.ndarray,
    columns: np.ndarray,
    inputs: np.ndarray,
    base: float,
    raw_out: np.ndarray,
    outputs_at: np.ndarray,
    n_outputs: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """sgt.leafwise's pass over `rows` of a one-output tree with constant or linear leaves (not
    adaptive), in one loop: `plan_pass`'s rows and events, and each taken row predicted as
    Tree.predict_rows predicts it (the node's value, plus, with `columns` non-empty, its `weights`
    of `columns` times the row's `inputs` added feature by feature in order), plus `base`, written
    to `raw_out` [rows, outputs] column 0, with `n_outputs` to `outputs_at`.

    Returns, of the taken rows that are learned at a leaf (what sgt.leafwise appends to the pending
    blocks), in row order: their rows, nodes, places among their node's learned rows and raw scores;
    then the events' rows and nodes, in row order. `nodes` and `learn` are the run's, by row; `inputs`
    the run's leaf inputs [rows, columns] (a constant tree passes no columns)."""
    n = rows.size
    seen = np.zeros(feature.size, dtype=np.int64)  # each node's learned rows so far in the pass
    done = np.zeros(feature.size, dtype=np.bool_)  # whether its event is found (later rows wait)
    learned = np.empty(n, dtype=np.int64)
    learned_nodes = np.empty(n, dtype=np.int64)
    place = np.empty(n, dtype=np.int64)
    raw = np.empty(n)
    event_rows = np.empty(n, dtype=np.int64)
    event_nodes = np.empty(n, dtype=np.int64)
    n_learned = n_events = 0
    for i in range(n):
        row = rows[i]
        node = nodes[row]
        if done[node]:
            continue
        count = seen[node]
        is_leaf = feature[node] < 0
        if learn[row]:
            count += 1
            seen[node] = count
            need = block[slot[node]] - pending_n[slot[node]] if is_leaf else 1
            if count == need:
                done[node] = True
                event_rows[n_events], event_nodes[n_events] = row, node
                n_events += 1
        total = value[node]
        for j in range(columns.size):
            total += weights[node, columns[j]] * inputs[row, j]
        total = total + base
        raw_out[row, 0] = total
        outputs_at[row] = n_outputs
        if learn[row] and is_leaf:
            learned[n_learned], learned_nodes[n_learned] = row, node
            place[n_learned], raw[n_learned] = count - 1, total
            n_learned += 1
    return (
        learned[:n_learned],
        learned_nodes[:n_learned],
        place[:n_learned],
        raw[:n_learned],
        event_rows[:n_events],
        event_nodes[:n_events],
    )


@compiled
def node_rows_after(nodes: np.ndarray, row: int, node: int) -> np.ndarray:
    """The rows after `row` whose node is `node`, ascending: sgt.leafwise._run_events' scan after an
    event, ``row + 1 + np.flatnonzero(nodes[row + 1:] == node)``."""
    out = np.empty(nodes.size - row - 1 if nodes.size > row else 0, dtype=np.int64)
    n = 0
    for i in range(row + 1, nodes.size):
        if nodes[i] == node:
            out[n] = i
            n += 1
    return out[:n]


@compiled
def leaf_rows_after(
    nodes: np.ndarray,
    learn: np.ndarray,
    row: int,
    node: int,
    stop: int,
    slot: np.ndarray,
    block: np.ndarray,
    pending_n: np.ndarray,
    out: np.ndarray,
    count: int,
) -> tuple[int, int]:
    """After the event at `row` of leaf `node` that stayed where it was (no split): its rows after `row`
    and before `stop`, ascending, written to `out` from `out[count]` on, and the earliest of them where
    its next event may fall, the `need`-th learned one (`need`: the rest of its block, block -
    pending_n of its slot, at least 1), or `stop` if fewer are learned; sgt.leafwise._run_events'
    `node_rows_after`, cut at `stop`, then `next_event` of those rows (which all sit at `node`).
    Returns (the count of rows in `out` after them, the event's row). The rows go to the caller's
    array rather than a new one returned: a returned array costs about 0.5 us to hand to Python, at
    every attempt of a batch."""
    own = slot[node]
    need = block[own] - pending_n[own]
    event = stop
    learned = 0
    for i in range(row + 1, stop):
        if nodes[i] == node:
            out[count] = i
            count += 1
            if learn[i]:
                learned += 1
                if learned == need:
                    event = i
    return count, event


@compiled
def next_event(
    rest: np.ndarray,
    learn: np.ndarray,
    nodes: np.ndarray,
    feature: np.ndarray,
    slot: np.ndarray,
    block: np.ndarray,
    pending_n: np.ndarray,
    stop: int,
) -> int:
    """sgt.leafwise._horizon: the earliest row of `rest` (ascending, not yet taken) where an event of
    their nodes may fall: with `need` the smallest number of learned rows any of their nodes takes
    before its event (the rest of a leaf's block, 1 at a branch), the `need`-th learned row of
    `rest`; `stop` when fewer are learned."""
    need = -1
    count = 0
    for i in range(rest.size):
        row = rest[i]
        if not learn[row]:
            continue
        count += 1
        node = nodes[row]
        own = 1 if feature[node] >= 0 else block[slot[node]] - pending_n[slot[node]]
        if need < 0 or own < need:
            need = own
    if need < 0 or need > count:
        return stop
    index = need - 1 if need > 0 else count + need - 1  # (numpy's index from the end, as leafwise's)
    for i in range(rest.size):
        row = rest[i]
        if learn[row]:
            if index == 0:
                return int(row)
            index -= 1
    return stop
