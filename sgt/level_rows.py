"""A regressor's rows served by the compiled loop (sgt.kernels.levels): its residual levels and its tree
choice packed into arrays, walked row by row, and unpacked, the same bits as the Python walk.

SGTRegressor (its trees' corrected predictions and the choice of the serving tree) and BoostedRegressor
(its ensemble's corrected score) call `served_rows` first, and walk the rows in Python where it
returns None: without the kernels (``SGT_KERNELS=0`` or no numba), or with a level whose class
changes how it corrects or learns (a benchmark variant), which the loop does not know.

>>> import numpy as np
>>> from sgt.residual import ResidualLevel
>>> level = ResidualLevel()
>>> out = served_rows(np.zeros((4, 1)), np.ones(4), np.ones(4, dtype=bool), [level], None)
>>> out is None or out.tolist() == [0.0, 0.0, 1.0, 1.0]  # ResidualLevel.apply's example
True
"""

from __future__ import annotations

import numpy as np

from sgt import kernels
from sgt.residual import DECAY, RATES, ResidualLevel

__all__ = ["served_rows"]


def served_rows(
    linked: np.ndarray,
    targets: np.ndarray,
    learn: np.ndarray,
    levels: list[ResidualLevel] | None,
    choice: list[float] | None,
    fading: float = 0.0,
    largest: float = 0.0,
) -> np.ndarray | None:
    """Each row's served prediction from the trees' predictions `linked` [rows, trees] (see
    sgt.kernels.levels.served_rows), updating `levels` (one per tree, or None) and `choice` (the
    trees' faded errors, a list changed in place, faded by `fading`, one record's error counting at
    most `largest`; or None: one tree) as the Python walk does; None (nothing changed) where the
    compiled loop does not apply."""
    if not kernels.ENABLED or (levels is not None and not _plain(levels)):
        return None
    trees = linked.shape[1]
    packed = _Packed(levels, trees)
    errors = np.array(choice if choice is not None else [], dtype=np.float64)
    out = kernels.served_rows(
        np.ascontiguousarray(linked, dtype=np.float64),
        np.ascontiguousarray(targets, dtype=np.float64),
        np.ascontiguousarray(learn, dtype=np.bool_),
        errors,
        float(fading),
        float(largest),
        levels is not None,
        packed.levels,
        packed.errors,
        packed.means,
        packed.mean_errors,
        packed.state,
        np.array(RATES, dtype=np.float64),
        packed.target_rates,
        DECAY,
    )
    if choice is not None:
        choice[:] = errors.tolist()
    if levels is not None:
        packed.unpack(levels)
    return out


def _plain(levels: list[ResidualLevel]) -> bool:
    """Whether the compiled loop does what `levels` do: ResidualLevel's own corrected and learn, four
    residual candidates and four target means (or none), at the same target rates."""
    kinds = {type(level) for level in levels}
    return (
        len(RATES) == 3
        and len({kind._target_rates for kind in kinds}) <= 1
        and all(
            kind.corrected is ResidualLevel.corrected and kind.learn is ResidualLevel.learn for kind in kinds
        )
        and all(
            len(level.levels) == len(level.errors) == 4
            and (level.means is None or len(level.mean_errors) == len(type(level)._target_rates) == 4)
            for level in levels
        )
    )


class _Packed:
    """The levels' floats as the kernel's arrays [trees, 4] (zeros for a model without levels)."""

    def __init__(self, levels: list[ResidualLevel] | None, trees: int) -> None:
        shape = (trees, 4)
        self.levels, self.errors = np.zeros(shape), np.zeros(shape)
        self.means, self.mean_errors = np.zeros(shape), np.zeros(shape)
        self.state = np.full(trees, kernels.NO_MEANS, dtype=np.int64)
        self.target_rates = np.zeros(4)
        for t, level in enumerate(levels or []):
            self.levels[t], self.errors[t] = level.levels, level.errors
            self.target_rates = np.array(type(level)._target_rates, dtype=np.float64)
            if level.means is None:
                continue
            self.mean_errors[t] = level.mean_errors
            if level.means:
                self.means[t], self.state[t] = level.means, kernels.MEANS
            else:
                self.state[t] = kernels.NOT_YET

    def unpack(self, levels: list[ResidualLevel]) -> None:
        """Write the arrays back into the levels (Python floats, as their own updates leave them)."""
        for t, level in enumerate(levels):
            level.levels, level.errors = self.levels[t].tolist(), self.errors[t].tolist()
            if level.means is None:
                continue
            level.mean_errors = self.mean_errors[t].tolist()
            level.means = self.means[t].tolist() if self.state[t] == kernels.MEANS else []
