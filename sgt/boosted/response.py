"""The boosted ensembles' drift response: when a warning or a drift is answered, and how.

Two Page-Hinkley tests (sgt.drift) watch the ensemble's prequential errors (0/1 errors; regression:
absolute errors relative to their running mean), a *warning* test at a share of the drift threshold
and the *drift* test. A warning starts (or restarts) a background ensemble that learns every later
record beside the main one; a drift replaces the main ensemble by the background one and is counted
by `n_drifts`. A drift that no warning came before starts a fresh ensemble, which replaces the main
one at once or, by the policy's `fresh_must_win`, once it made fewer errors over a period. The
ensemble is replaced whole: boosting members depend on the members before them, so replacing one
member would leave every later one fitted to a sum that no longer exists. A background ensemble that
no drift confirms within the policy's `background_life` is dropped. A new ensemble may first learn
the recent records since the change its detector estimates (the policy's `replay`). Every answer is
taken at a fixed multiple of records learned, so every batching gives the same model. The policy
(sgt.boosted.policy) holds the variants; docs/decisions.md gives the measurements behind them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sgt.boosted.ensemble import _Core
from sgt.boosted.member import OFFSETS, TARGET, Member
from sgt.boosted.spans import NO_EVENTS, Batch
from sgt.drift import PageHinkley
from sgt.tree import leaf_inputs_of

__all__: list[str] = []


class _Responding(_Core):
    """The ensemble's answers to warnings and drifts, and the young ensembles' parameters."""

    # -- young ensembles (the policy's `youth`) ----------------------------------------------
    def _follow_linear_start(self) -> None:
        """Every member's linear steps as `_linear_steps_now` says (at a fixed row: see `_run_encoded`)."""
        for member in self._all_members():
            member.set_tree_params(linear_steps=self._linear_steps_now(member.n_outputs))

    def _follow_youth(self) -> None:
        """Every ensemble's parameters for its age (at a fixed row: see `_run_encoded`)."""
        youth = self._policy.youth
        if youth is None:
            return
        for ensemble, since in self._ensembles():
            share = self._youth_share(since)
            scale = 1.0 if youth.delta_factor is None else youth.delta_factor ** (1.0 - share)
            changes: dict[str, Any] = {}
            for name in ("lambda_", "grace_period", "grace_start"):
                young = getattr(youth, name)
                if young is not None:
                    value = young + share * (getattr(self, name) - young)
                    changes[name] = value if name == "lambda_" else round(value)
            for member in ensemble:
                member.set_delta_scale(scale)
                member.set_tree_params(delta=self._member_delta(member.n_outputs) * scale, **changes)

    def _youth_share(self, since: int) -> float:
        """How far an ensemble started at `since` has moved from its young parameters (0 to 1), by its
        age at the start of the current drift period."""
        youth = self._policy.youth
        assert youth is not None
        if since == 0 and not youth.first:
            return 1.0
        period = self._policy.drift_period
        age = (self._n_seen - since) // period * period
        return min(1.0, age / youth.records)

    def _weights(self, learn: np.ndarray, since: int | None = None, first: int | None = None) -> np.ndarray:
        """Bagging weight of every row for every member of the ensemble started at `since` (None: the
        main one) ([members, rows]; 0 for rows not learned); the first learned row is record `first`
        (None: the next one)."""
        youth = self._policy.youth
        rate = None
        if youth is not None and youth.poisson_rate is not None and self.poisson_rate is not None:
            share = self._youth_share(self._members_since if since is None else since)
            rate = youth.poisson_rate + share * (self.poisson_rate - youth.poisson_rate)
        first = self._n_seen if first is None else first
        return self._bagging.weights(learn, self._member_count(), first, rate)

    # -- answers -------------------------------------------------------------------------------
    def _answer_drift(self) -> None:
        """At a fixed point: replace the ensemble after a drift, or start a background one after a warning.

        A drift with a background ensemble learning (since a warning) replaces the main ensemble by it.
        A drift without one starts a fresh ensemble: it replaces the main one at once, or (the policy's
        `fresh_must_win`) leaves the main one predicting until the fresh one makes fewer errors over a
        period, since a fresh ensemble predicts worse than the old one for its first records, even
        after a drift, and the old one adapts by itself to some drifts. With `race_after_warning`, a
        background ensemble that made fewer errors than the main one over the period replaces it
        without a drift alarm.
        """
        policy = self._policy
        if self._pending:
            if self._lead > 0.0:
                self._replace()
            elif self._background_expired():
                self._drop_background()  # the main ensemble adapted: no replacement needed
                self._reset_detectors()
        elif self._detector.alarm:
            if self._background is None:
                self._start_background(self._detector)
                self._pending = policy.fresh_must_win
            if not self._pending:
                self._replace()
        elif policy.race_after_warning and self._background is not None and self._lead > 0.0:
            self._replace()  # the warning's background already predicts better: answered before an alarm
        elif self._warning.alarm:
            self._start_background(self._warning, policy.replay_warned)
            self._warning.reset()
        elif self._background is not None and self._background_expired():
            self._drop_background()  # no drift confirmed the warning: stop paying for it
        self._lead = 0.0  # a lead counts over one period

    def _answer_alarm(self) -> None:
        """Between the points where drifts are answered (every `alarm_period` records): a drift alarm
        with no background ensemble learning, which a fresh ensemble would replace at once at the next
        such point, replaces it now (what a warning started waits for the drift period)."""
        if self._detector.alarm and self._background is None and not self._policy.fresh_must_win:
            self._start_background(self._detector)
            self._replace()

    def _background_expired(self) -> bool:
        """Whether the background ensemble has learned for the policy's `background_life` records."""
        return self._n_seen - self._background_since >= self._policy.background_life

    def _start_background(self, detector: PageHinkley | None = None, most: int | None = None) -> None:
        """A new background ensemble; with the policy's `replay`, it first learns the recent records
        since the change `detector` estimates (at most `most`)."""
        self._retire(self._background or [])
        self._background = self._new_members()
        self._background_since = self._n_seen
        if self._policy.replay and detector is not None:
            k = math.ceil(self._policy.replay_share * detector.rising)
            self._learn_recent(self._background, k if most is None else min(k, most))

    def _learn_recent(self, members: list[Member], k: int) -> None:
        """`members` (a new ensemble, young) learn the last k records kept (as many as are), with the
        bagging weights of those records."""
        codes, targets = self._recent.last(k, self._layout.n_features)
        k = targets.size
        if not k:
            return
        self._follow_youth()
        learn = np.ones(k, dtype=bool)
        width = self._n_raw(0) + int(self._outputs.every_class_from_three)
        table = np.zeros((k, OFFSETS + width))
        table[:, TARGET] = targets
        weights = self._weights(learn, self._background_since, first=self._n_seen - k)
        base = self._base_columns(k, width, learn, targets, NO_EVENTS)
        part = Batch(codes, leaf_inputs_of(self._layout, codes)).part(0, k)
        self._run_members(members, part, table, weights, base, learn, NO_EVENTS, {})

    def _replace(self) -> None:
        """The background ensemble becomes the main one: a drift answered."""
        assert self._background is not None
        self._retire(self._members)
        self._members, self._background = self._background, None
        self._members_since = self._background_since
        self._reset_detectors()
        self._n_drifts += 1

    def _drop_background(self) -> None:
        self._retire(self._background or [])
        self._background = None

    def _reset_detectors(self) -> None:
        self._detector.reset()
        self._warning.reset()
        self._pending = False

    def _retire(self, members: list[Member]) -> None:
        """Keep the changes of members about to be dropped in `version`, so that it never decreases."""
        counted = next((changes for ran, changes in self._ran_past if ran is members), None)
        self._retired_version += sum(m.changes() for m in members) if counted is None else counted
