"""The exact span engine of the boosted ensembles: a batch run as a one-record loop would run it.

Exactness: in a one-record loop member m's prediction of record i depends only on records before i
(prequential) and its learning of record i only on its own state and the predictions of members
before it. So a batch is processed member after member, each one over the whole batch with the
chunked exact algorithm of sgt.base, and gives the same bits as the loop.

Warnings and drifts are answered only at multiples of the policy's periods of records learned, points
fixed by the record sequence, so every batching gives the same model. A batch is not cut at each
point: each ensemble runs a span of rows at once, through the points, and the detectors then take the
span's errors a window at a time, answering at each point as if the batch had been cut there
(`_run_span`). That is exact because an ensemble learns the same way whatever the detectors decide: an
answer only chooses whose scores count from its point on, starts an ensemble (which runs the rest of
the span from there) or drops one, and a dropped ensemble's changes count in `version` as of its point
(`Marks`). A span saves each member its fixed costs per run; it may waste the rest of the span run by
an ensemble dropped inside it, so a span stops at each point while an answer is likely (`_quiet`) and
runs at most `MAX_SPAN` rows while quiet (the measurements: docs/decisions.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from sgt.boosted.ensemble import _Core
from sgt.boosted.member import OFFSETS, TARGET, Marks, Member
from sgt.boosted.policy import MAX_SPAN, QUIET_SHARE
from sgt.boosted.spans import Batch, EnsembleRun, Rows
from sgt.features import CODE_DTYPE, Regrid
from sgt.tree import leaf_inputs_of

__all__: list[str] = []


class _Boosting(_Core):
    """What the boosted classifier and regressor share (a mixin over SGTClassifier / SGTRegressor):
    the ensembles' state (sgt.boosted.ensemble), the drift response (sgt.boosted.response) and the
    exact batch runs here."""

    # -- learning ------------------------------------------------------------------------------
    def _learn_one(self, x: Any, y: Any) -> None:
        """One record: encoded as the single trees' learn_one does (same codes as a batch's)."""
        learn = np.ones(1, dtype=bool)
        targets, events = self._prepare_targets([y], learn)
        codes = np.array([self._space.encode_one(x, learn=True)], dtype=CODE_DTYPE)
        self._run_encoded(codes, targets, learn, events, {0: self._space.take_regrids()})

    def _run(self, X: Any, y: Sequence[Any] | None, out: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Predict then learn each row in order: the ensemble's raw scores [rows, outputs], and the
        outputs (classes) known when each row was predicted. (``out``, the smoothed probabilities of a
        single committee, is never given: the ensemble's ``proba`` is always "tree".)"""
        assert out is None
        rows = self._encoded_rows(X, y)
        if isinstance(rows, np.ndarray):  # with a memory budget (see BaseSGT._widening_rows)
            return self._run_parts(X, y, None, rows)
        return self._run_encoded(rows.codes, rows.targets, rows.learn, rows.events, rows.regrids)

    def _run_encoded(
        self,
        codes: np.ndarray,
        targets: np.ndarray,
        learn: np.ndarray,
        events: np.ndarray,
        regrids: dict[int, list[Regrid]],
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows already coded; `regrids`: the grids that grew at each row, which every member (and
        the background ensemble) carries its trees over to when it reaches that row."""
        n = codes.shape[0]
        self._sync_layout()
        targets = np.asarray(targets, dtype=np.float64)
        width = self._n_raw(len(events))
        rows = Rows(Batch(codes, leaf_inputs_of(self._layout, codes)), targets, learn, events, regrids)
        if n == 1:  # (learn_one) every stop and cut a row brings lies after it: the row is one span
            self._follow_linear_start()
            self._follow_youth()
            return self._run_span(rows, 0, 1, [], width)
        out = np.zeros((n, width))
        outputs_at = np.zeros(n, dtype=np.intp)
        learned = self._n_seen + np.cumsum(learn)
        period = math.gcd(self._policy.drift_period, self._policy.alarm_period)
        stops = np.flatnonzero(learn & (learned % period == 0)) + 1
        if self.drift_threshold is None and self._policy.youth is None:
            stops = stops[:0]  # the model changes at those points only to answer a drift or to age
        # where the members' parameters change a batch is cut: at every stop while ensembles age (Youth),
        # where members are added, and where linear terms may start stepping (a fixed learned record)
        cuts = stops if self._policy.youth is not None else stops[:0]
        cuts = np.union1d(cuts, self._growth_cuts(events))
        multiclass_start = self._linear_start(2)  # (members of one tree start at 0 unless given)
        cuts = np.union1d(cuts, np.flatnonzero(learn & (learned == multiclass_start)) + 1).astype(np.intp)
        drift_points = set(stops[learned[stops - 1] % self._policy.drift_period == 0].tolist())
        for start, end in itertools.pairwise([0, *cuts[cuts < n].tolist(), n]):
            self._follow_linear_start()
            self._follow_youth()
            inside = stops[(stops > start) & (stops < end)].tolist()
            while start < end:
                span_end = self._span_end(start, inside, end, drift_points)
                windows = [s for s in inside if start < s < span_end]
                out[start:span_end], outputs_at[start:span_end] = self._run_span(
                    rows, start, span_end, windows, width
                )
                if rows.regrids_in(start, span_end):  # thresholds moved: the batch's routes are stale
                    rows.batch.forget_routes()
                start = span_end
        return out, outputs_at

    def _span_end(self, start: int, stops: list[int], end: int, drift_points: set[int]) -> int:
        """Where the span of rows from `start` that every ensemble runs at once ends: while the
        ensemble is `_quiet`, at `end` or the last stop within `MAX_SPAN` rows; else at the next stop
        where an answer may change it (a stop between the drift period's, `drift_points`, answers only
        an alarm with no background ensemble, by a fresh one replacing the main one at once).

        The cap bounds what a drift inside a quiet span wastes: on the worker benchmark's stream, whose
        partitions' batches of 2,000 each start on a new concept, uncapped spans gave 18,800 records/s,
        spans of at most 1,000, 500 and 250 rows 21,700, 23,100 and 22,200, and stopping at every stop
        20,400; on the benchmark streams (batches of 1,000) 500 rows cost up to 10% against 1,000."""
        if self._quiet():
            within = [s for s in stops if start < s <= start + MAX_SPAN]
            return end if end <= start + MAX_SPAN else max(within, default=end)
        alarms_wait = self._background is not None or self._policy.fresh_must_win
        return next((s for s in stops if s > start and (s in drift_points or not alarms_wait)), end)

    def _quiet(self) -> bool:
        """Whether nothing is likely to change at the next stops: no background ensemble learns (an
        answer may replace or drop either ensemble) and each drift test's excess is at most
        `QUIET_SHARE` of its threshold.

        Only the speed depends on it: the answers at stops inside a span are taken as if the span were
        cut there (`_run_span`). A span saves each member its fixed costs per run; what it may waste is
        the rest of the span run by an ensemble that an answer drops or replaces.
        """
        if self._background is not None or self._response.pending:
            return False
        return self.drift_threshold is None or self._response.quiet(QUIET_SHARE)

    def _run_span(
        self, rows: Rows, start: int, end: int, stops: list[int], width: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows [start, end): every ensemble runs them at once (member after member); then the detectors
        take them a window at a time, up to each of `stops` and to `end`, answering drifts after each.

        The result is the same as cutting the span at each stop: an ensemble learns the same way
        whatever happens to the others (its members depend only on its own state and on the rows), and
        the detectors see the same errors in the same windows. An answer only chooses which ensemble's
        scores count from its stop on; an ensemble it starts runs the rest of the span from there.
        """
        columns = width + int(
            self._outputs.every_class_from_three
        )  # the members' (see `Outputs.first_column`)
        runs: list[EnsembleRun] = []
        out = np.zeros((end - start, width))
        outputs_at = np.zeros(end - start, dtype=np.intp)
        first = start
        for last in [*stops, end]:
            predicted = self._scores_of(runs, self._members, rows, first, last, stops, end, columns)
            background = None
            if self._background is not None:
                background = self._scores_of(runs, self._background, rows, first, last, stops, end, columns)
            out[first - start : last - start] = predicted
            self._ran_past = [(run.members, run.changes[last]) for run in runs if last in run.changes]
            outputs_at[first - start : last - start] = self._close_window(
                rows, first, last, predicted, background
            )
            self._ran_past = []
            first = last
        return out, outputs_at

    def _scores_of(
        self,
        runs: list[EnsembleRun],
        ensemble: list[Member],
        rows: Rows,
        first: int,
        last: int,
        stops: list[int],
        end: int,
        width: int,
    ) -> np.ndarray:
        """The ensemble's raw scores of rows [first, last), from its run of the span (made now from
        `first` to `end` if it has none: it started at `first`)."""
        run = next((r for r in runs if r.members is ensemble), None)
        if run is None:
            run = self._run_ensemble(ensemble, rows, first, end, [s for s in stops if s > first], width)
            runs.append(run)
        return run.scores[first - run.first : last - run.first]

    def _run_ensemble(
        self, ensemble: list[Member], rows: Rows, start: int, end: int, stops: list[int], width: int
    ) -> EnsembleRun:
        """The ensemble learns rows [start, end): its raw scores of them, as predicted, and its changes
        as of each of `stops` (rows inside)."""
        n = end - start
        learn, targets = rows.learn[start:end], rows.targets[start:end]
        events = rows.events_in(start, end)
        table = np.zeros((n, OFFSETS + width))
        table[:, TARGET] = targets
        since = self._background_since if ensemble is self._background else None
        weights = self._weights(learn, since)
        base = self._base_columns(n, width, learn, targets, events)
        part = rows.batch.part(start, end)
        rows_marked = [stop - start for stop in stops]
        watched = ensemble if stops else []  # (no stop inside the span: no changes to count)
        marks = [Marks(rows_marked) for _ in watched]
        for member, mark in zip(watched, marks, strict=True):
            member.watch(mark)
        regrids = rows.regrids_in(start, end)
        raw = self._run_members(ensemble, part, table, weights, base, learn, events, regrids)
        changes = [0] * len(stops)
        for member, mark in zip(watched, marks, strict=True):
            mark.reach(n, member)
            changes = [a + b for a, b in zip(changes, mark.changes, strict=True)]
            member.watch(None)
        scores = self._reference_scores(raw)
        return EnsembleRun(ensemble, start, scores, dict(zip(stops, changes, strict=True)))

    def _close_window(
        self, rows: Rows, first: int, last: int, predicted: np.ndarray, background: np.ndarray | None
    ) -> np.ndarray:
        """After the ensembles ran rows [first, last): count them, keep them for a replay, register their
        events, feed the detectors and answer a drift if a fixed point is reached; the outputs known
        when each row was predicted."""
        learn, targets = rows.learn[first:last], rows.targets[first:last]
        events = rows.events_in(first, last)
        outputs_at = self._outputs_at(last - first, events)
        learned = np.flatnonzero(learn)
        self._n_seen += int(learned.size)
        if self._policy.replay:
            regrids = rows.regrids_in(first, last)
            regridded = int(np.searchsorted(learned, max(regrids))) if regrids else None
            self._recent.remember(rows.batch.codes[first:last][learned], targets[learned], regridded)
        self._register_events(targets, events)
        if self.drift_threshold is not None and learned.size:
            response = self._response
            errors = self._errors(predicted[learned], targets[learned], outputs_at[learned])
            background_errors = None
            if background is not None and response.watches_background():
                background_errors = self._errors(background[learned], targets[learned], outputs_at[learned])
            response.watch(errors, background_errors)
            if self._n_seen % self._policy.drift_period == 0 and learn[-1]:
                response.answer_drift(self)
            elif self._n_seen % self._policy.alarm_period == 0 and learn[-1]:
                response.answer_alarm(self)
        self._refresh_trees()
        return outputs_at

    def _outputs_at(self, n: int, events: np.ndarray) -> np.ndarray:
        """Outputs (classes) known when each row is predicted: an event counts from the row after it."""
        return self._n_outputs() + np.searchsorted(events, np.arange(n), side="left")
