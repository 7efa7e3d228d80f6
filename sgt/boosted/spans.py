"""A batch as the boosted ensembles run it, in spans: codes, leaf inputs, targets and routes.

Every member of every ensemble runs the same rows, a span at a time (sgt.boosted.engine). What they
share is kept here once per batch: the codes and leaf inputs, each tree's routes of the rest of the
batch (`Batch`), and the rows that bring a new target or grow a grid (`Rows`).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from sgt.boosted.member import Member
from sgt.features import Regrid
from sgt.tree import LeafInputs

__all__ = ["NO_EVENTS", "Batch", "EnsembleRun", "Part", "Rows"]

NO_EVENTS = np.zeros(0, dtype=np.intp)


class _Routed(NamedTuple):
    """A tree's routes of a batch's rows from `first` on, made when it had `n_nodes` nodes."""

    n_nodes: int
    first: int
    nodes: np.ndarray
    stopped: np.ndarray


class EnsembleRun(NamedTuple):
    """An ensemble's raw scores of a span's rows from row `first` on (see `SpanEngine._run_span`)."""

    members: list[Member]
    first: int
    scores: np.ndarray
    changes: dict[int, int]  # its changes as of each stop inside the span after `first`


class Batch:
    """What every member shares over a batch: its codes, its leaf inputs, and each member's routes.

    A batch may be run in several spans (at most DRIFT_PERIOD records each while a drift is likely;
    see `SpanEngine._quiet`), member after member, and routing rows costs numpy's fixed cost per tree
    level whatever their number. So each tree routes the rest of the batch once; a later span takes its
    rows' routes from there, moving on only the rows that sit at a node that has since become a branch
    (a leaf that split, or a nominal branch where the row stopped and that may since have learned its
    category). Grown grids move thresholds: everything is routed anew.
    """

    def __init__(self, codes: np.ndarray, inputs: LeafInputs) -> None:
        self.codes = codes
        self.inputs = inputs
        self._routed: dict[Member, list[_Routed]] = {}

    def forget_routes(self) -> None:
        self._routed.clear()

    def part(self, start: int, end: int) -> Part:
        return Part(self, start, end)

    def routed(self, member: Member) -> list[_Routed]:
        """The member's trees' routes held so far (a list the caller extends)."""
        return self._routed.setdefault(member, [])


@dataclasses.dataclass(frozen=True)
class Rows:
    """A batch as the ensembles run it: its codes (with leaf inputs and routes), targets and which rows
    are learned, the rows that bring a new target (`events`) and those where grids grew (`regrids`)."""

    batch: Batch
    targets: np.ndarray
    learn: np.ndarray
    events: np.ndarray
    regrids: dict[int, list[Regrid]]

    def events_in(self, start: int, end: int) -> np.ndarray:
        """The events of rows [start, end), counted from `start`."""
        if not self.events.size:  # (most runs: numpy's cost per call would dominate a record learned alone)
            return self.events
        return self.events[(self.events >= start) & (self.events < end)] - start

    def regrids_in(self, start: int, end: int) -> dict[int, list[Regrid]]:
        """The grids that grew at rows [start, end), by row counted from `start`."""
        return {row - start: r for row, r in self.regrids.items() if start <= row < end and r}


class Part:
    """Rows [start, end) of a batch: one span."""

    def __init__(self, batch: Batch, start: int, end: int) -> None:
        self._batch, self._start, self._end = batch, start, end
        self.codes = batch.codes[start:end]
        self.inputs = LeafInputs(
            batch.inputs.columns, batch.inputs.values[start:end], batch.inputs.every_column
        )

    def routes(self, member: Member) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each of the member's trees' (node, stopped) of the span's rows, to be updated in place
        (a member's trees only grow in number: a new class adds one)."""
        held = self._batch.routed(member)
        routes = []
        for t, tree in enumerate(member.trees):
            if t == len(held):
                nodes, stopped = tree.route(self._batch.codes[self._start :])
                held.append(_Routed(tree.n_nodes, self._start, nodes, stopped))
            routed = held[t]
            lo, hi = self._start - routed.first, self._end - routed.first
            nodes, stopped = routed.nodes[lo:hi], routed.stopped[lo:hi]
            if routed.n_nodes != tree.n_nodes:
                moved = np.flatnonzero(tree.feature[nodes] >= 0)
                if moved.size:
                    nodes[moved], stopped[moved] = tree.route(self.codes[moved], start=nodes[moved])
            routes.append((nodes, stopped))
        return routes
