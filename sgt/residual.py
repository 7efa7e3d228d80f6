"""The regressors' residual level: the recent mean of a model's own errors, added where it has helped,
or the recent mean of the targets, predicted where it has.

A tree moves a leaf's value only when the leaf's block of records is full (every `grace_period`
records), so on a target that wanders over time (a time series: TrumpApproval, WaterFlow, a random
walk) the prediction lags the level by up to a block, and the trees cannot learn the lag: it is
not a function of the features. The model's prequential residuals then share a slowly moving mean.
`ResidualLevel` keeps exponentially weighted means of those residuals at a few rates (`RATES`) and
adds to the model's prediction the one whose corrected predictions have had the smallest recent
absolute error (a decayed sum, `DECAY`), or none while no correction has beaten the plain prediction.
Where the wandering level is most of the target, the trees' leaves hold levels of other times and
their predictions scatter about it, which no added mean removes: the recent targets themselves (their
means at `TARGET_RATES`, the last target the fastest) are candidates too, and replace the prediction
while they have erred least. On a stationary stream the residuals have no lasting mean, the targets'
means err more than the model, and "none" keeps winning, so the prediction stays the model's. The
trees never see the correction: they learn as before (and the boosted regressor's drift tests watch
its members' own errors).

Two models use it: `BoostedRegressor` corrects its ensemble's score (sgt.boosted.regressor), and
`SGTRegressor` the prediction of each of its trees (sgt.regressor), each with an identity link only.

Every update is a few Python float operations per learned record, in row order, so the batch, the
one-record loop and a restored model (the state is sixteen floats, saved exactly) give the same bits.
A level saved before the target means restores without them and predicts as it did.

>>> level = ResidualLevel()
>>> level.apply([0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [True] * 4).tolist()  # none wins ties
[0.0, 0.0, 1.0, 1.0]
>>> old = ResidualLevel(means=None)  # as saved before the target means
>>> old.apply([0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [True] * 4).tolist()
[0.0, 0.0, 0.75, 0.875]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

__all__ = ["DECAY", "RATES", "TARGET_RATES", "ResidualLevel"]

#: the rates of the residual means a prediction may be corrected by (besides none): a level that moves
#: from record to record (0.5) to one that drifts over tens of records (0.05)
RATES = (0.5, 0.2, 0.05)
#: the rates of the recent means of the targets themselves that may replace the prediction: the last
#: target (1.0) to a mean over tens of records (0.05). Where the model's own predictions are noise about
#: a wandering level (a random walk: the trees' leaves learned at other levels) no correction of them
#: helps, and the recent targets predict best (docs/decisions.md, "The residual level's candidates")
TARGET_RATES = (1.0, 0.5, 0.2, 0.05)
#: the decay of each candidate's summed absolute error per learned record (a memory of about 100
#: records: the choice follows a stream that changes from wandering to stationary and back)
DECAY = 0.99


class ResidualLevel:
    """Means of the residuals at `RATES`, of the targets at `TARGET_RATES`, and the decayed absolute
    errors of the predictions they make.

    Candidate 0 is the prediction uncorrected; candidate k in 1..3 adds the residuals' mean at rate
    `RATES[k - 1]`; candidate 4 + j predicts the targets' mean at rate `TARGET_RATES[j]` instead (until
    the first learned record, the prediction uncorrected). The prediction made is that of the candidate
    with the smallest decayed error (the first of equal ones: none at the start).

    `means` None: no target candidates (a level saved before them restores so, and predicts as then);
    `()` (the default): target candidates, none learned yet.
    """

    # the target means' rates (a class attribute so that a benchmark variant may change them)
    _target_rates: ClassVar[tuple[float, ...]] = TARGET_RATES

    def __init__(
        self,
        levels: Sequence[float] | None = None,
        errors: Sequence[float] | None = None,
        means: Sequence[float] | None = (),
        mean_errors: Sequence[float] | None = None,
    ) -> None:
        size = len(RATES) + 1
        self.levels = [0.0] * size if levels is None else [float(v) for v in levels]
        self.errors = [0.0] * size if errors is None else [float(v) for v in errors]
        if len(self.levels) != size or len(self.errors) != size:
            raise ValueError(f"a residual level holds {size} levels and {size} errors")
        self.means: list[float] | None = None if means is None else [float(v) for v in means]
        self.mean_errors: list[float] = []
        if self.means is not None:
            count = len(TARGET_RATES)
            if len(self._target_rates) != count:
                raise ValueError(f"a residual level's target means have {count} rates")
            self.mean_errors = [0.0] * count if mean_errors is None else [float(v) for v in mean_errors]
            if len(self.means) not in (0, count) or len(self.mean_errors) != count:
                raise ValueError(f"a residual level holds {count} (or no) target means and {count} errors")

    def corrected(self, prediction: float) -> float:
        """The prediction made of an uncorrected `prediction`: that of the candidate with the smallest
        error (the first of equal ones). SGTRegressor asks it for each tree and row, `apply` for each row."""
        e0, e1, e2, e3 = self.errors
        best, level = e0, 0.0
        if e1 < best:
            best, level = e1, self.levels[1]
        if e2 < best:
            best, level = e2, self.levels[2]
        if e3 < best:
            best, level = e3, self.levels[3]
        if self.means:  # a target mean replaces the prediction where it has erred strictly less
            errors = self.mean_errors
            least = min(errors)
            if least < best:
                return self.means[errors.index(least)]  # (the first of equal ones)
        return prediction + level

    def correction(self, prediction: float = 0.0) -> float:
        """What the correction adds to `prediction` (a residual mean's level adds the same to any)."""
        return self.corrected(prediction) - prediction

    def learn(self, prediction: float, target: float) -> None:
        """Take a learned record's uncorrected `prediction` and its `target`, after its prediction
        (prequential). A non-finite residual (a diverged prediction or target) is skipped: it would
        poison every level."""
        target = float(target)
        residual = target - float(prediction)
        if not math.isfinite(residual):
            return
        _, l1, l2, l3 = self.levels
        e0, e1, e2, e3 = self.errors
        r1, r2, r3 = RATES
        self.errors = [
            DECAY * e0 + abs(residual - 0.0),
            DECAY * e1 + abs(residual - l1),
            DECAY * e2 + abs(residual - l2),
            DECAY * e3 + abs(residual - l3),
        ]
        self.levels = [0.0, l1 + r1 * (residual - l1), l2 + r2 * (residual - l2), l3 + r3 * (residual - l3)]
        means = self.means
        if means is None:
            return
        if not means:  # the first learned record: until now each target mean predicted as candidate 0
            self.mean_errors = [DECAY * error + abs(residual - 0.0) for error in self.mean_errors]
            self.means = [target] * len(self._target_rates)
            return
        # (unrolled, as the residual means: four rates, checked when the level was made)
        m1, m2, m3, m4 = means
        f1, f2, f3, f4 = self.mean_errors
        t1, t2, t3, t4 = self._target_rates
        self.mean_errors = [
            DECAY * f1 + abs(target - m1),
            DECAY * f2 + abs(target - m2),
            DECAY * f3 + abs(target - m3),
            DECAY * f4 + abs(target - m4),
        ]
        self.means = [
            m1 + t1 * (target - m1),
            m2 + t2 * (target - m2),
            m3 + t3 * (target - m3),
            m4 + t4 * (target - m4),
        ]

    def apply(self, predictions: Any, targets: Any, learn: Any) -> np.ndarray:
        """The corrected predictions of rows in order (`predictions` uncorrected), learning each row
        where `learn` says so, after its prediction (prequential): `corrected` and `learn` a row at a
        time, so the batch and the one-record paths make the same float operations.

        A few microseconds a row, against tens for the members."""
        values = np.asarray(predictions, dtype=np.float64).tolist()
        goals = np.asarray(targets, dtype=np.float64).tolist()
        learned = np.asarray(learn, dtype=bool).tolist()
        out = []
        for prediction, target, learns in zip(values, goals, learned, strict=True):
            out.append(self.corrected(prediction))
            if learns:
                self.learn(prediction, target)
        return np.array(out, dtype=np.float64)

    def state(self) -> dict[str, list[float]]:
        """The saved state (floats, which the header keeps exactly); the target means' keys only where
        the level has them (so a level restored without them saves as it was saved)."""
        saved = {"levels": list(self.levels), "errors": list(self.errors)}
        if self.means is not None:
            saved.update(means=list(self.means), mean_errors=list(self.mean_errors))
        return saved

    @classmethod
    def restored(cls, state: dict[str, Any]) -> ResidualLevel:
        """A saved level; saved without target means (before them), it has none and predicts as then."""
        return cls(state["levels"], state["errors"], state.get("means"), state.get("mean_errors"))
