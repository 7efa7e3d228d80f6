"""The regressors' residual level: the recent mean of a model's own errors, added where it has helped.

A tree moves a leaf's value only when the leaf's block of records is full (every `grace_period`
records), so on a target that wanders over time (a time series: TrumpApproval, WaterFlow, a random
walk) the prediction lags the level by up to a block, and the trees cannot learn the lag: it is
not a function of the features. The model's prequential residuals then share a slowly moving mean.
`ResidualLevel` keeps exponentially weighted means of those residuals at a few rates (`RATES`) and
adds to the model's prediction the one whose corrected predictions have had the smallest recent
absolute error (a decayed sum, `DECAY`), or none while no correction has beaten the plain prediction.
On a stationary stream the residuals have no lasting mean and "none" keeps winning, so the prediction
stays the model's. The trees never see the correction: they learn as before (and the boosted
regressor's drift tests watch its members' own errors).

Two models use it: `BoostedRegressor` corrects its ensemble's score (sgt.boosted.regressor), and
`SGTRegressor` the prediction of its serving tree (sgt.regressor), each with an identity link only.

Every update is a few Python float operations per learned record, in row order, so the batch, the
one-record loop and a restored model (the state is eight floats, saved exactly) give the same bits.

>>> level = ResidualLevel()
>>> level.apply([0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [True] * 4).tolist()  # none wins ties
[0.0, 0.0, 0.75, 0.875]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["DECAY", "RATES", "ResidualLevel"]

#: the rates of the residual means a prediction may be corrected by (besides none): a level that moves
#: from record to record (0.5) to one that drifts over tens of records (0.05)
RATES = (0.5, 0.2, 0.05)
#: the decay of each candidate's summed absolute error per learned record (a memory of about 100
#: records: the choice follows a stream that changes from wandering to stationary and back)
DECAY = 0.99


class ResidualLevel:
    """Means of the residuals at `RATES` and the decayed absolute errors of the corrections they make.

    Candidate 0 is no correction; candidate k > 0 adds the mean at rate `RATES[k - 1]`. The correction
    made is the candidate with the smallest decayed error (the first of equal ones: none at the start).
    """

    def __init__(self, levels: Sequence[float] | None = None, errors: Sequence[float] | None = None) -> None:
        size = len(RATES) + 1
        self.levels = [0.0] * size if levels is None else [float(v) for v in levels]
        self.errors = [0.0] * size if errors is None else [float(v) for v in errors]
        if len(self.levels) != size or len(self.errors) != size:
            raise ValueError(f"a residual level holds {size} levels and {size} errors")

    def correction(self) -> float:
        """What is added to the next prediction: the level of the candidate with the smallest error
        (the first of equal ones), unrolled as in `apply` (SGTRegressor asks it for each tree and row)."""
        e0, e1, e2, e3 = self.errors
        best, level = e0, 0.0
        if e1 < best:
            best, level = e1, self.levels[1]
        if e2 < best:
            best, level = e2, self.levels[2]
        if e3 < best:
            level = self.levels[3]
        return level

    def learn(self, prediction: float, target: float) -> None:
        """Take the residual of the uncorrected `prediction` of a record with `target`: the float
        operations of one learned row of `apply`, in the same order (the same bits), without its
        arrays (SGTRegressor's trees each take one a record)."""
        residual = float(target) - float(prediction)
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

    def apply(self, predictions: Any, targets: Any, learn: Any) -> np.ndarray:
        """The corrected predictions of rows in order (`predictions` uncorrected), learning the
        residual of each row where `learn` says so, after its prediction (prequential). A non-finite
        residual (a diverged prediction) is skipped: it would poison every level.

        One pass of Python floats over the rows, the candidates unrolled (`RATES` has three): about a
        microsecond a row, against tens for the members."""
        values = np.asarray(predictions, dtype=np.float64).tolist()
        goals = np.asarray(targets, dtype=np.float64).tolist()
        learned = np.asarray(learn, dtype=bool).tolist()
        _, l1, l2, l3 = self.levels  # (candidate 0's level is always 0.0)
        e0, e1, e2, e3 = self.errors
        r1, r2, r3 = RATES
        decay, isfinite = DECAY, math.isfinite
        out = []
        for prediction, target, learns in zip(values, goals, learned, strict=True):
            # the first candidate with the smallest error, as `correction` takes it
            best, level = e0, 0.0
            if e1 < best:
                best, level = e1, l1
            if e2 < best:
                best, level = e2, l2
            if e3 < best:
                level = l3
            out.append(prediction + level)
            if learns:
                residual = target - prediction
                if isfinite(residual):
                    e0 = decay * e0 + abs(residual - 0.0)
                    e1 = decay * e1 + abs(residual - l1)
                    e2 = decay * e2 + abs(residual - l2)
                    e3 = decay * e3 + abs(residual - l3)
                    l1 += r1 * (residual - l1)
                    l2 += r2 * (residual - l2)
                    l3 += r3 * (residual - l3)
        self.levels = [0.0, l1, l2, l3]
        self.errors = [e0, e1, e2, e3]
        return np.array(out, dtype=np.float64)

    def state(self) -> dict[str, list[float]]:
        """The saved state (floats, which the header keeps exactly)."""
        return {"levels": list(self.levels), "errors": list(self.errors)}

    @classmethod
    def restored(cls, state: dict[str, Any]) -> ResidualLevel:
        return cls(state["levels"], state["errors"])
