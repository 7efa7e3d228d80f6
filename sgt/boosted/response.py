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

from typing import Any, Protocol

import numpy as np

from sgt.boosted.policy import DRIFT_MIN_RECORDS, DriftPolicy
from sgt.drift import PageHinkley

__all__ = ["DriftResponse"]


class Ensembles(Protocol):
    """What a drift response does to the ensembles it answers for (the model: sgt.boosted.ensemble)."""

    def has_background(self) -> bool: ...

    def background_expired(self) -> bool: ...

    def start_background(self, detector: PageHinkley | None = None, most: int | None = None) -> None: ...

    def promote_background(self) -> None: ...

    def drop_background(self) -> None: ...


class DriftResponse:
    """The two drift tests of an ensemble, what they saw, and the policy's answers at the fixed points.

    It decides when an ensemble starts, replaces the main one or is dropped; the ensembles (`Ensembles`)
    carry it out. Its state is saved with the model (`state`, `restore`).

    Parameters
    ----------
    policy
        The variant of the answer (sgt.boosted.policy).
    threshold, delta
        The drift test's alarm level and tolerated rise (the warning test's level: the policy's
        `warning_share` of it).
    relative
        Whether the errors are relative absolute errors (a regressor's) rather than 0/1 errors.
    """

    def __init__(self, policy: DriftPolicy, threshold: float, delta: float, relative: bool) -> None:
        self.policy = policy
        self.detector = PageHinkley(delta, threshold, DRIFT_MIN_RECORDS, relative=relative)
        self.warning = PageHinkley(
            delta, policy.warning_share * threshold, DRIFT_MIN_RECORDS, relative=relative
        )
        self.pending = False  # a drift without a warning: a fresh background must beat the main one
        self.lead = 0.0  # while pending: the main ensemble's errors minus the background's, this period
        self.n_drifts = 0

    def watches_background(self) -> bool:
        """Whether the background ensemble's errors count (`watch`): while it must win, or races."""
        return self.pending or self.policy.race_after_warning

    def watch(self, errors: np.ndarray, background_errors: np.ndarray | None) -> None:
        """The main ensemble's errors of the rows learned since the last call, in order; the background
        ensemble's too while they count."""
        self.detector.update(errors)
        self.warning.update(errors)
        if background_errors is not None:
            lead = errors - background_errors
            self.lead = float(np.cumsum(np.concatenate(([self.lead], lead)))[-1])  # in order

    def quiet(self, share: float) -> bool:
        """Whether neither test is alarmed or has an excess above `share` of its threshold."""
        return not any(d.alarm or d.excess > share * d.threshold for d in (self.detector, self.warning))

    def answer_drift(self, ensembles: Ensembles) -> None:
        """At a fixed point: replace the ensemble after a drift, or start a background one after a warning.

        A drift with a background ensemble learning (since a warning) replaces the main ensemble by it.
        A drift without one starts a fresh ensemble: it replaces the main one at once, or (the policy's
        `fresh_must_win`) leaves the main one predicting until the fresh one makes fewer errors over a
        period, since a fresh ensemble predicts worse than the old one for its first records, even
        after a drift, and the old one adapts by itself to some drifts. With `race_after_warning`, a
        background ensemble that made fewer errors than the main one over the period replaces it
        without a drift alarm.
        """
        policy = self.policy
        if self.pending:
            if self.lead > 0.0:
                self._replace(ensembles)
            elif ensembles.background_expired():
                ensembles.drop_background()  # the main ensemble adapted: no replacement needed
                self._reset()
        elif self.detector.alarm:
            if not ensembles.has_background():
                ensembles.start_background(self.detector, None)
                self.pending = policy.fresh_must_win
            if not self.pending:
                self._replace(ensembles)
        elif policy.race_after_warning and ensembles.has_background() and self.lead > 0.0:
            self._replace(ensembles)  # the warning's background already predicts better: before an alarm
        elif self.warning.alarm:
            ensembles.start_background(self.warning, policy.replay_warned)
            self.warning.reset()
        elif ensembles.has_background() and ensembles.background_expired():
            ensembles.drop_background()  # no drift confirmed the warning: stop paying for it
        self.lead = 0.0  # a lead counts over one period

    def answer_alarm(self, ensembles: Ensembles) -> None:
        """Between the points where drifts are answered (every `alarm_period` records): a drift alarm
        with no background ensemble learning, which a fresh ensemble would replace at once at the next
        such point, replaces it now (what a warning started waits for the drift period)."""
        if self.detector.alarm and not ensembles.has_background() and not self.policy.fresh_must_win:
            ensembles.start_background(self.detector, None)
            self._replace(ensembles)

    def _replace(self, ensembles: Ensembles) -> None:
        """The background ensemble becomes the main one: a drift answered."""
        ensembles.promote_background()
        self._reset()
        self.n_drifts += 1

    def _reset(self) -> None:
        self.detector.reset()
        self.warning.reset()
        self.pending = False

    def restore(self, extra: dict[str, Any]) -> None:
        """The state saved with the model (the keys of `_Core._boosting_state`)."""
        self.detector.restore(extra["detector"])
        self.warning.restore(extra["warning"])
        self.n_drifts = int(extra["n_drifts"])
        self.pending = bool(extra.get("pending", False))
        self.lead = float(extra.get("lead", 0.0))
