"""The exact batch path of a model with one tree, taken node by node (sgt.base's `_run_codes` uses it).

A model with one tree (a binary classifier, a regressor, a member of an ensemble with one tree per
member, multi-output ones included) computes a row's gradient from the tree's prediction of that row
alone, and the prediction from the node the row reaches. Learning a row changes that node only: the
row joins its leaf's pending block, and when the block fills, the leaf's attempt changes the leaf (its
value, its linear term, or a split into children); a row that stops at a nominal branch with a
category the branch has never learned gives the branch a child for it. So a row's prediction and
gradient depend only on the *events* of its own node before it (attempts, new category children),
never on rows at other nodes.

The chunked path (sgt.base) cuts the whole run at every event of any leaf, and pays numpy's fixed cost
per call in every chunk. This path instead takes, in one numpy pass, the rows of every node up to that
node's next event (predicted, their gradients computed and appended to the pending blocks), then runs
the events, then takes the rows after them in the next pass: a few passes per run instead of a chunk
per event.

Order still matters across nodes in one respect: node ids and leaf slots are handed out in the order
of the splits and category children, and the saved model holds them. So the events run in row order,
and an event runs only when no earlier event can still be unknown. After an event at row r, the node's
remaining rows (at the node itself, or moved to its children) are not taken yet, and their next event
lies at least `need` of their learned rows further on, `need` being the smallest block among those
nodes (a fresh block after an attempt; 1 where rows stop at a nominal branch). That row is the
*horizon*: events beyond it wait for the next pass, which takes those remaining rows.

Not for models whose hooks watch the rows in order (the classifier's smoothing and young naive Bayes,
see `BaseSGT._leafwise`); hooks that need only the node each row was predicted at get them at the end
of the run (`Watched`, `BaseSGT._observe_nodewise`). Nor for several trees, whose outputs meet in one
softmax: there an attempt of any tree changes every later row's gradient.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from sgt import kernels
from sgt.split import Candidate
from sgt.tree import LeafInputs, Tree

if TYPE_CHECKING:
    from sgt.base import BaseSGT

__all__ = ["Run", "Watched", "run_leafwise"]


class Run(NamedTuple):
    """The arrays of one `_run_codes` call that the passes read and write."""

    nodes: np.ndarray  # each row's node (updated in place as the tree changes)
    stopped: np.ndarray  # whether the row stops at a nominal branch (likewise)
    codes: np.ndarray
    targets: np.ndarray
    learn: np.ndarray
    raw_out: np.ndarray  # [rows, outputs]: the raw scores each row was predicted with
    outputs_at: np.ndarray
    inputs: LeafInputs
    watched: Watched | None = None  # where each row was predicted, for hooks that watch the rows


class Watched(NamedTuple):
    """Where each row of a run was predicted (by row): its node then, and whether that node was a leaf
    (else a nominal branch that stopped the row). For a model whose hooks follow the rows
    (`BaseSGT._watches_nodewise`): the run moves a row's node in `Run.nodes` as the tree splits."""

    nodes: np.ndarray
    at_leaves: np.ndarray

    @classmethod
    def of(cls, n: int) -> Watched:
        return cls(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=bool))


@dataclasses.dataclass(frozen=True)
class Context:
    """What the passes need of the model that runs them: its one tree and feature space, the base of
    its raw scores and the outputs known (both fixed within a run: no row of it brings a new target),
    its gradients, and the calls that count learned rows, announce changes and learn an event's row
    on the one-record path."""

    tree: Tree
    space: Any  # sgt.features.FeatureSpace
    base: float
    n_outputs: int
    gradients: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
    gradients_of_rows: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
    count_learned: Callable[[int], None]
    before_changes: Callable[[int], None]
    learn_event: Callable[[int, np.ndarray, Any], None]

    @classmethod
    def of(cls, model: BaseSGT) -> Context:
        """The context of `model` (an estimator of sgt.base, whose `_run_codes` runs the passes)."""

        def count_learned(k: int) -> None:
            model._n_seen += k

        def learn_event(row: int, codes: np.ndarray, target: Any) -> None:
            model._observe_event(row)
            model._learn_codes(codes, target)

        return cls(
            model._trees[0],
            model._space,
            model._base(),
            model._n_outputs(),
            model._gradients,
            model._gradients_of_rows,
            count_learned,
            model._before_changes,
            learn_event,
        )


class Event(NamedTuple):
    """A row that fills its leaf's block, or stops at a nominal branch, and is learned."""

    row: int  # (rows are distinct: a queue orders events by row alone)
    node: int
    candidate: Candidate | None  # a filled leaf's evaluated attempt, for `Tree.act`


def run_leafwise(model: BaseSGT, start: int, stop: int, run: Run) -> None:
    """Predict then learn rows [start, stop) of a one-tree model, node by node; the same bits as the
    chunked path. The rows hold no new target and grow no grid."""
    context = Context.of(model)
    rows = np.arange(start, stop)
    queue: list[Event] = []
    while rows.size:
        for event in _evaluate(context.tree, _take(context, rows, run, stop)):
            heapq.heappush(queue, event)
        rows = _run_events(context, queue, run, stop)


def _take(context: Context, rows: np.ndarray, run: Run, stop: int) -> list[tuple[int, int]]:
    """Take `rows` (ascending) up to each node's next event: predict them, append the learned ones
    to their leaves (the filling row too: its attempt follows as an event); return the events' rows
    and nodes."""
    tree = context.tree
    at = run.nodes[rows] if run.watched is not None else None  # (the pass moves no row)
    if kernels.ENABLED and _one_pass(tree):
        events = _take_compiled(context, rows, run, stop)
    else:
        events = _take_planned(context, rows, run, stop)
    if run.watched is not None and at is not None:
        _watch(tree, rows, at, events, run.watched, stop)
    return events


def _watch(
    tree: Tree, rows: np.ndarray, at: np.ndarray, events: list[tuple[int, int]], watched: Watched, stop: int
) -> None:
    """Note where the pass predicted its taken rows: each node's rows up to its event, or all of them."""
    limit = np.full(tree.n_nodes, stop)
    if events:
        event_rows, event_nodes = np.array(events, dtype=np.int64).T
        limit[event_nodes] = event_rows
    taken = rows <= limit[at]
    watched.nodes[rows[taken]] = at[taken]
    watched.at_leaves[rows[taken]] = tree.feature[at[taken]] < 0


def _take_planned(context: Context, rows: np.ndarray, run: Run, stop: int) -> list[tuple[int, int]]:
    """`_take` by sgt.kernels' plan_pass (or numpy), then `_predict_append`."""
    tree = context.tree
    at = run.nodes[rows]
    if kernels.ENABLED:
        taken, leaf, place, event_rows, event_nodes = kernels.plan_pass(
            rows, at, run.learn[rows], tree.feature, tree.slot, tree.block, tree.pending_n
        )
        _predict_append(context, rows[taken], leaf, place, run)
        return list(zip(event_rows.tolist(), event_nodes.tolist()))
    leaf = tree.feature[at] < 0
    learned = run.learn[rows]
    slot = tree.slot[at]
    # learned rows each node takes before its event: the rest of its block, or one at a branch
    need = np.where(leaf, tree.block[slot] - tree.pending_n[slot], 1)
    order = np.argsort(at, kind="stable")
    grouped = at[order]
    counts = np.cumsum(learned[order])
    first = np.searchsorted(grouped, grouped, side="left")
    rank = counts - counts[first] + learned[order][first]
    hit = order[learned[order] & (rank == need[order])]
    events = list(zip(rows[hit].tolist(), at[hit].tolist()))
    limit = np.full(tree.n_nodes, stop)
    limit[at[hit]] = rows[hit]
    taken = rows <= limit[at]
    # a learned row's place among its node's learned rows: where it goes in the leaf's pending block
    place = np.empty_like(rank)
    place[order] = rank - 1
    _predict_append(context, rows[taken], leaf[taken], place[taken], run)
    return events


def _one_pass(tree: Tree) -> bool:
    """Whether `_take_compiled` takes the tree's rows: a one-output tree with constant or linear
    leaves (an adaptive leaf serves its constant or its linear term; a multi-output tree predicts
    several outputs)."""
    return type(tree) is Tree and not tree.adaptive


def _take_compiled(context: Context, rows: np.ndarray, run: Run, stop: int) -> list[tuple[int, int]]:
    """`_take` by sgt.kernels' take_pass, which plans the pass and predicts its rows in one loop (the
    same rows, places, events and raw scores as plan_pass and Tree.predict_rows), then the learned
    rows' gradients and their append, as `_predict_append` computes them: the same bits."""
    tree = context.tree
    columns = run.inputs.columns if tree.linear else _NO_COLUMNS
    weights = tree.weights if tree.linear else _NO_WEIGHTS
    learned, nodes, place, raw, event_rows, event_nodes = kernels.take_pass(
        rows,
        run.nodes,
        run.learn,
        tree.feature,
        tree.slot,
        tree.block,
        tree.pending_n,
        tree.value,
        weights,
        columns,
        run.inputs.values,
        context.base,
        run.raw_out,
        run.outputs_at,
        context.n_outputs,
    )
    if learned.size:
        g, h = context.gradients_of_rows(raw, run.targets, learned)
        _append(tree, learned, run.codes, nodes, g, h, place)
        context.count_learned(int(learned.size))
    return list(zip(event_rows.tolist(), event_nodes.tolist()))


def _append(
    tree: Tree,
    learned: np.ndarray,
    codes: np.ndarray,
    nodes: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    place: np.ndarray,
) -> None:
    """Tree.append of the run's rows `learned` (their codes read from the run's `codes` in place) at
    their `nodes`, each at `place` among the rows its leaf takes, by sgt.kernels' append_taken: the
    room made first where a block's capacity is short, as Tree.append makes it."""
    arrays = (learned, codes, nodes, g, h, place, tree.slot, tree.pending_n)
    if not kernels.append_taken(*arrays, tree.pending_codes, tree.pending_g, tree.pending_h):
        tree.reserve_pending(int((tree.pending_n[tree.slot[nodes]] + place).max()) + 1)
        # (reserving replaces the pending arrays: read them again)
        kernels.append_taken(*arrays, tree.pending_codes, tree.pending_g, tree.pending_h)


# what a constant tree passes for its (absent) linear terms: no columns, so the weights go unread
_NO_COLUMNS = np.zeros(0, dtype=np.intp)
_NO_COLUMNS.flags.writeable = False
_NO_WEIGHTS = np.zeros((1, 1))
_NO_WEIGHTS.flags.writeable = False


def _evaluate(tree: Tree, events: list[tuple[int, int]]) -> list[Event]:
    """The events, with the first half of each filled leaf's attempt done, all leaves in one pass.

    Early, but exact: the evaluation reads and changes the leaf alone, and no row reaches the leaf
    again before its event acts (`_take` stops each node's rows at its event)."""
    filled = [node for _, node in events if tree.feature[node] < 0]
    candidates = iter(tree.evaluate_leaves(filled) if filled else [])
    return [Event(row, node, next(candidates) if tree.feature[node] < 0 else None) for row, node in events]


def _predict_append(
    context: Context, rows: np.ndarray, leaf: np.ndarray, place: np.ndarray, run: Run
) -> None:
    """Predict `rows` at their nodes, then append the learned ones at leaves to their pending blocks
    (a learned row at a branch is an event: it is learned by the one-record path), each learned row
    at `place` among the rows its leaf takes."""
    tree = context.tree
    nodes = run.nodes[rows]
    inputs = LeafInputs(run.inputs.columns, run.inputs.values[rows], run.inputs.every_column)
    raw = tree.predict_outputs(nodes, inputs) + context.base  # [outputs, rows]
    run.raw_out[rows, : raw.shape[0]] = raw.T
    run.outputs_at[rows] = context.n_outputs
    appends = run.learn[rows] & leaf
    if not appends.any():
        return
    if appends.all():  # (mostly: every row learned, at a leaf) the arrays as they are, not copies
        learned, raw_learned, place_learned = rows, raw, place
    else:
        appended = np.flatnonzero(appends)
        learned, raw_learned, nodes, place_learned = (
            rows[appended],
            raw[:, appended],
            nodes[appended],
            place[appended],
        )
    g, h = context.gradients(raw_learned, run.targets[learned])
    if tree.n_outputs == 1:
        g, h = g[0], h[0]
    tree.append(nodes, run.codes[learned], g, h, place_learned)
    context.count_learned(int(learned.size))


def _run_events(context: Context, queue: list[Event], run: Run, stop: int) -> np.ndarray:
    """Run the queued events in row order up to the horizon; return the rows they leave to take
    (ascending): each event's node's rows after it, routed anew where the tree changed."""
    tree = context.tree
    horizon = stop
    waiting = []
    # the rows of the leaves that stayed (by sgt.kernels' leaf_rows_after): each lies after the first
    # event and before `stop`, and at one node, so it is written once
    stayed = np.empty(stop - queue[0].row if kernels.ENABLED and queue else 0, dtype=np.intp)
    n_stayed = 0
    while queue and queue[0].row < horizon:
        row, node, candidate = heapq.heappop(queue)
        context.before_changes(row)
        if candidate is None:  # a branch learns a new category: the one-record path
            context.learn_event(row, run.codes[row], run.targets[row])
            moved = True
        else:
            moved = tree.act(node, candidate, context.space)
            if not moved and kernels.ENABLED:  # (mostly) the leaf stays: its rows, then its next event
                arrays = (tree.slot, tree.block, tree.pending_n, stayed)
                n_stayed, event = kernels.leaf_rows_after(
                    run.nodes, run.learn, row, node, stop, *arrays, n_stayed
                )
                horizon = min(horizon, event)  # (`stop` where no row is left)
                continue
        # every later row at the node moves (the rows from `stop` on too: the run goes on after it)
        if kernels.ENABLED:
            later = kernels.node_rows_after(run.nodes, row, node)
        else:
            later = row + 1 + np.flatnonzero(run.nodes[row + 1 :] == node)
        if moved and later.size:
            run.nodes[later], run.stopped[later] = tree.route(run.codes[later], start=run.nodes[later])
        rest = later[later < stop]
        if not rest.size:
            continue
        waiting.append(rest)
        horizon = min(horizon, _horizon(tree, rest, run, stop))
    if n_stayed:
        waiting.append(stayed[:n_stayed])
    if not waiting:
        return np.zeros(0, dtype=np.intp)
    if len(waiting) == 1:  # one event's rows, or those of leaves that stayed
        return waiting[0] if n_stayed == 0 else np.sort(waiting[0])
    return np.sort(np.concatenate(waiting))


def _horizon(tree: Tree, rest: np.ndarray, run: Run, stop: int) -> int:
    """The earliest row where an event of the nodes `rest` (not yet taken) now sit at may fall."""
    if kernels.ENABLED:
        feature, slot, block, pending_n = tree.feature, tree.slot, tree.block, tree.pending_n
        return kernels.next_event(rest, run.learn, run.nodes, feature, slot, block, pending_n, stop)
    learned = rest[run.learn[rest]]
    if not learned.size:
        return stop
    at = run.nodes[learned]  # (repeated nodes leave the smallest need as it is)
    slot = tree.slot[at]
    need = int(np.where(tree.feature[at] >= 0, 1, tree.block[slot] - tree.pending_n[slot]).min())
    return int(learned[need - 1]) if need <= learned.size else stop
