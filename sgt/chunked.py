"""The chunked exact batch path every estimator shares (`BaseSGT._run_codes` takes it).

One record at a time, learning is: encode the record; register its target (a new class adds a
tree; a regressor's first target sets the base score); route it through every tree, creating a
leaf where a category is first learned at a nominal branch; compute g and h of the loss at the
current prediction; add them to each tree's leaf; attempt a split where a leaf's block fills.

A batch does exactly that, but vectorised: between *events* the trees do not change, so a whole run
of records is routed, predicted and appended to the leaves' pending blocks with numpy. An event is a
record that fills a leaf's block (a split attempt follows), brings a new target (class or base score),
or reaches a nominal branch with a category the branch has never learned. The event record goes
through the one-record path (a record that only fills leaves is learned one record after the run
before it, on the gradients computed with it); records after it are re-routed only where the tree
changed. Predictions come out strictly prequential: each record is predicted by the model that has
learned every record before it. sgt.batch finds the events; leaf inputs are computed once per batch.

A model with one tree, whose hooks need not see the rows in order, takes the stretches between new
targets and grown grids node by node instead (sgt.leafwise): the same bits in fewer numpy passes. A
batch of at most `ROW_BY_ROW_MAX` rows takes the one-record path row by row.

These are functions of the model rather than methods so that the estimator's class reads as its
parameters, hooks and persistence; `BaseSGT._run_codes` and `_run_parts` stay the methods subclasses
override or call.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sgt.batch import Events
from sgt.features import FeatureSpace, Regrid
from sgt.layout import LeafInputs, leaf_inputs_of
from sgt.leafwise import Run, Watched, run_leafwise

if TYPE_CHECKING:
    from sgt.base import BaseSGT

__all__ = ["ROW_BY_ROW_MAX", "Shifted", "before_regrids", "run_codes", "run_parts", "widening_rows"]

# batches of at most this many rows take the one-record path (see _run_rows)
ROW_BY_ROW_MAX = 16


def run_parts(
    model: BaseSGT, X: Any, y: Sequence[Any] | None, out: Any, cuts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`_run` of rows [0, cuts[0]), [cuts[0], cuts[1]), ... in turn, as one run's result (every
    learning path gives the same model whatever the batches)."""
    bounds = [0, *cuts.tolist(), len(X)]
    parts = []
    for start, end in itertools.pairwise(bounds):
        shifted = None if out is None else Shifted(out, start)
        rows_y = None if y is None else _slice(y, start, end)
        parts.append(model._run(_slice(X, start, end), rows_y, shifted))
    return _joined(parts)


def run_codes(
    model: BaseSGT,
    codes: np.ndarray,
    targets: np.ndarray,
    learn: np.ndarray,
    target_events: np.ndarray,
    out: Any = None,
    regrids: dict[int, list[Regrid]] | None = None,
    inputs: LeafInputs | None = None,
    routes: list[tuple[np.ndarray, np.ndarray]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """`_run` after encoding: rows already coded in the current layout, targets prepared,
    `regrids` the grids that grew at each row (by row); if known, `inputs` the rows' leaf inputs
    and `routes` each tree's (node, stopped) of every row (updated in place as the trees change).

    A separate entry so that an ensemble can encode a batch once and run each member on the codes.
    """
    n = codes.shape[0]
    regrids = regrids or {}
    capacity = model._n_raw_scores() + len(target_events)
    raw = np.zeros((n, capacity))
    outputs_at = np.zeros(n, dtype=np.intp)
    if n <= ROW_BY_ROW_MAX:
        _run_rows(model, codes, targets, learn, raw, outputs_at, out, regrids)
        return raw, outputs_at
    if inputs is None:
        inputs = leaf_inputs_of(model._layout, codes)
    if routes is None:
        routes = [tree.route(codes) for tree in model._trees]
    events = Events(
        model._trees,
        routes,
        learn,
        np.union1d(target_events, np.fromiter(regrids, dtype=np.intp, count=len(regrids))),
    )
    fold = model._folds_fills()
    watched = Watched.of(n) if model._watches_nodewise() else None
    start = 0
    while start < n:
        if model._leafwise():  # up to the next new target or grown grid, node by node
            stop = events.next_fixed(start, n)
            if stop > start:
                run = Run(*routes[0], codes, targets, learn, raw, outputs_at, inputs, watched)
                run_leafwise(model, start, stop, run)
                if watched is not None:
                    model._observe_nodewise(start, stop, watched, raw, targets, learn, codes)
                events.forget([0])
                start = stop
                continue
        end, fill = events.next(start, n)
        if fill and fold:  # the filling row learns at the end of the plain rows before it
            model._before_changes(end)
            changed = _run_plain(
                model, start, end + 1, routes, codes, targets, learn, raw, outputs_at, out, inputs, fills=True
            )
            _reroute(model, end + 1, routes, codes, changed)
            events.forget(t for t, _ in changed)
            start = end + 1
            continue
        if end > start:
            _run_plain(model, start, end, routes, codes, targets, learn, raw, outputs_at, out, inputs)
        if end == n:
            break
        if end in regrids:
            nodes, row_raw, before = before_regrids(model, codes[end], regrids[end])
            model._observe_row(out, end, nodes, row_raw, before)  # before the grids grow
            model._apply_regrids(regrids[end])
            for t, tree in enumerate(model._trees):  # thresholds may have moved: route the rest anew
                routes[t][0][end + 1 :], routes[t][1][end + 1 :] = tree.route(codes[end + 1 :])
            events.forget(range(len(model._trees)))
        else:
            nodes = [int(r[0][end]) for r in routes]
            row_raw = model._raw_one(nodes, codes[end])
            model._observe_row(out, end, nodes, row_raw, codes[end])
        raw[end, : len(row_raw)] = row_raw
        outputs_at[end] = model._n_outputs()
        if learn[end]:
            model._observe_event(end)
            model._before_changes(end)
            changed = model._learn_codes(codes[end], targets[end])
            _reroute(model, end + 1, routes, codes, changed)
            events.forget(t for t, _ in changed)
        start = end + 1
    return raw, outputs_at


def before_regrids(
    model: BaseSGT, codes: np.ndarray | list[int], regrids: list[Regrid]
) -> tuple[list[int], list[float], list[int]]:
    """Nodes, raw scores and codes of a record that grows grids, as predicted before learning it (on
    the old grids)."""
    before = list(codes)
    for regrid in regrids:
        before[regrid.feature] = regrid.code_before
    nodes = [tree.route_one(before)[0] for tree in model._trees]
    return nodes, model._raw_one(nodes, before), before


def _run_rows(
    model: BaseSGT,
    codes: np.ndarray,
    targets: np.ndarray,
    learn: np.ndarray,
    raw: np.ndarray,
    outputs_at: np.ndarray,
    out: Any,
    regrids: dict[int, list[Regrid]],
) -> None:
    """A few rows: each one as the chunked path treats an event row, i.e. as the one-record path.

    The chunked path's numpy passes have a fixed cost a call, which dominates for a handful of rows
    (a streaming worker's batch at a low rate); one row at a time on the trees' list mirrors is
    faster there (docs/decisions.md, "Trees: exact arithmetic"). Same arithmetic, so the same bits.
    """
    for i, row in enumerate(codes.tolist()):
        if i in regrids:
            nodes, row_raw, before = before_regrids(model, row, regrids[i])
            model._observe_row(out, i, nodes, row_raw, before)  # before the grids grow
            model._apply_regrids(regrids[i])
        else:
            nodes = [tree.route_one(row)[0] for tree in model._trees]
            row_raw = model._raw_one(nodes, row)
            model._observe_row(out, i, nodes, row_raw, row)
        raw[i, : len(row_raw)] = row_raw
        outputs_at[i] = model._n_outputs()
        if learn[i]:
            model._observe_event(i)
            model._before_changes(i)
            model._learn_codes(row, targets[i])


def _run_plain(
    model: BaseSGT,
    start: int,
    end: int,
    routes: list[tuple[np.ndarray, np.ndarray]],
    codes: np.ndarray,
    targets: np.ndarray,
    learn: np.ndarray,
    raw_out: np.ndarray,
    outputs_at: np.ndarray,
    out: Any,
    inputs: LeafInputs,
    fills: bool = False,
) -> list[tuple[int, int]]:
    """Rows [start, end) hold no event: predict them all, then learn the labelled ones. With
    `fills`, the last row (labelled) fills a leaf instead: it is learned last, as one record, on
    the gradients computed with the others; return the (tree, node) pairs whose routing changed."""
    outputs_at[start:end] = model._n_outputs()
    if not model._trees:
        model._observe_plain(out, start, end, [], None, targets, learn, codes[start:end])
        model._n_seen += int(learn[start:end].sum())
        return []
    base = model._base()
    chunk = [nodes[start:end] for nodes, _ in routes]
    raw = np.concatenate(
        [tree.predict_outputs(nodes, inputs, start) + base for tree, nodes in zip(model._trees, chunk)]
    )
    raw_out[start:end, : raw.shape[0]] = raw.T
    model._observe_plain(out, start, end, chunk, raw, targets, learn, codes[start:end])
    rows = np.flatnonzero(learn[start:end])
    if not rows.size:
        return []
    g, h = model._gradients(raw[:, rows], targets[start:end][rows])
    plain = rows.size - 1 if fills else rows.size
    if plain:
        block = codes[start:end][rows[:plain]]
        for t, (tree, c) in enumerate(zip(model._trees, model._tree_columns())):
            tree.append(chunk[t][rows[:plain]], block, g[c, :plain], h[c, :plain])
        model._n_seen += plain
    if not fills:
        return []
    return model._learn_fill([int(nodes[-1]) for nodes in chunk], codes[end - 1], g[:, -1], h[:, -1])


def _reroute(
    model: BaseSGT,
    first: int,
    routes: list[tuple[np.ndarray, np.ndarray]],
    codes: np.ndarray,
    changed: list[tuple[int, int]],
) -> None:
    """After an event, move the remaining rows that sat at a changed node (or in a new tree)."""
    n = codes.shape[0]
    while len(routes) < len(model._trees):
        tree = model._trees[len(routes)]
        routes.append((np.zeros(n, dtype=np.int32), np.zeros(n, dtype=bool)))
        routes[-1][0][first:], routes[-1][1][first:] = tree.route(codes[first:])
    for t, node in changed:
        nodes, stopped = routes[t]
        rows = first + np.flatnonzero(nodes[first:] == node)
        if rows.size:
            nodes[rows], stopped[rows] = model._trees[t].route(codes[rows], start=nodes[rows])


def widening_rows(
    snapshot: tuple[Any, ...], space: FeatureSpace, codes: np.ndarray, learn: np.ndarray
) -> np.ndarray:
    """The rows after the first of a batch whose learning widens the layout in a one-record loop: a
    feature first learned there, or a category that grows a nominal feature's width
    (`FeatureSpace.widths`). `snapshot`: the space before the batch; `space`: after encoding it.

    Only learned rows register features and categories, with codes in the order they are first met,
    so a nominal feature's categories after a row number its largest code so far.
    """
    names, vocab = snapshot[1], snapshot[4]
    found = []
    for j in range(len(space.names)):
        column = np.where(learn, codes[:, j], 0)  # (a predicted row's unknown category registers none)
        if j >= len(names):
            found.append(np.flatnonzero(column)[:1])
        if space.vocab[j] is None:
            continue
        before = len(vocab[j]) if j < len(names) else 0
        sizes = np.maximum(before, np.maximum.accumulate(column.astype(np.int64)))
        bits = np.frexp(np.maximum(sizes, 2).astype(np.float64))[1]  # int.bit_length, by row
        found.append(np.flatnonzero(np.diff(bits, prepend=max(before, 2).bit_length())))
    rows = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.intp)
    return rows[rows > 0].astype(np.intp)


class Shifted:
    """A run's `out` for a part of its rows from `start` on: rows it is given move by `start`."""

    def __init__(self, out: Any, start: int) -> None:
        self._out, self._start = out, start

    def put(self, rows: int | slice, values: np.ndarray) -> None:
        if isinstance(rows, slice):
            rows = slice(rows.start + self._start, rows.stop + self._start)
        else:
            rows = rows + self._start
        self._out.put(rows, values)


def _slice(rows: Any, start: int, end: int) -> Any:
    """Rows [start, end) of a batch's records or targets (an array, or any sequence)."""
    if isinstance(rows, (np.ndarray, list, tuple)):
        return rows[start:end]
    return list(rows)[start:end]


def _joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The raw scores and outputs of consecutive runs as one run's (narrower scores padded with zeros,
    as a run leaves the columns a row has no output for)."""
    width = max(raw.shape[1] for raw, _ in parts)
    raws = [np.pad(raw, ((0, 0), (0, width - raw.shape[1]))) for raw, _ in parts]
    return np.concatenate(raws), np.concatenate([outputs for _, outputs in parts])
