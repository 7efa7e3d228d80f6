"""The regressors' per-row serving loop, compiled: residual levels (sgt.residual.ResidualLevel) and the
single regressor's tree choice (sgt.regressor's `fade_errors` and `least_error`), the same bits.

A regressor's batch predicts every row with its trees' scores first, then walks the rows in order:
each tree's prediction is corrected by its residual level, the tree with the lowest faded error
serves, and a learned row then fades the trees' errors and teaches each level its residual. In
Python that walk is a few microseconds per row and tree, as much as the trees' own learning on a
small stream; here it is one loop over arrays that hold the levels' and the choice's floats
(`served_rows`), each float operation the Python code's, on the same operands, in the same order.

The state arrays, per tree t: `levels[t]` and `errors[t]` (ResidualLevel.levels and .errors, four
each), `means[t]` and `mean_errors[t]` (its target means and their errors, four each) with
`state[t]` saying which of them it has: `NO_MEANS` (saved before the target means), `NOT_YET` (none
learned yet) or `MEANS`. sgt.level_rows packs a model's levels into them and back.
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled

__all__ = ["MEANS", "NOT_YET", "NO_MEANS", "served_rows"]

#: `state` of a tree's level: no target means (a level saved before them), none learned yet, learned
NO_MEANS, NOT_YET, MEANS = 0, 1, 2


@compiled
def _corrected(
    t: int,
    prediction: float,
    levels: np.ndarray,
    errors: np.ndarray,
    means: np.ndarray,
    mean_errors: np.ndarray,
    state: np.ndarray,
) -> float:
    """ResidualLevel.corrected of tree t's level: the candidate with the smallest error (the first of
    equal ones), a target mean only where it erred strictly less."""
    best, level = errors[t, 0], 0.0
    for k in range(1, 4):
        if errors[t, k] < best:
            best, level = errors[t, k], levels[t, k]
    if state[t] == MEANS:
        least, index = mean_errors[t, 0], 0
        for j in range(1, mean_errors.shape[1]):  # (Python's min: the first smallest)
            if mean_errors[t, j] < least:
                least, index = mean_errors[t, j], j
        if least < best:
            return means[t, index]
    return prediction + level


@compiled
def _learn(
    t: int,
    prediction: float,
    target: float,
    levels: np.ndarray,
    errors: np.ndarray,
    means: np.ndarray,
    mean_errors: np.ndarray,
    state: np.ndarray,
    rates: np.ndarray,
    target_rates: np.ndarray,
    decay: float,
) -> None:
    """ResidualLevel.learn of tree t's level: a learned record's uncorrected `prediction` and `target`
    (a non-finite residual is skipped)."""
    residual = target - prediction
    if not np.isfinite(residual):
        return
    errors[t, 0] = decay * errors[t, 0] + abs(residual - 0.0)
    for k in range(1, 4):
        held = levels[t, k]
        errors[t, k] = decay * errors[t, k] + abs(residual - held)
        levels[t, k] = held + rates[k - 1] * (residual - held)
    levels[t, 0] = 0.0
    if state[t] == NO_MEANS:
        return
    if state[t] == NOT_YET:  # the first learned record: until now each mean predicted as candidate 0
        for j in range(mean_errors.shape[1]):
            mean_errors[t, j] = decay * mean_errors[t, j] + abs(residual - 0.0)
            means[t, j] = target
        state[t] = MEANS
        return
    for j in range(mean_errors.shape[1]):
        held = means[t, j]
        mean_errors[t, j] = decay * mean_errors[t, j] + abs(target - held)
        means[t, j] = held + target_rates[j] * (target - held)


@compiled
def served_rows(
    linked: np.ndarray,
    targets: np.ndarray,
    learn: np.ndarray,
    choice: np.ndarray,
    fading: float,
    largest: float,
    levelled: bool,
    levels: np.ndarray,
    errors: np.ndarray,
    means: np.ndarray,
    mean_errors: np.ndarray,
    state: np.ndarray,
    rates: np.ndarray,
    target_rates: np.ndarray,
    decay: float,
) -> np.ndarray:
    """Each row's served prediction from its trees' predictions `linked` [rows, trees], as
    SGTRegressor's rows are served (`levelled`: each tree's prediction corrected by its level, as
    the levels stood before the row; `choice` the trees' faded errors, the lowest serving, the first
    on ties; empty: one tree). A row learned (`learn`, its checked target in `targets`) then fades
    the choice's errors by `fading` with its corrected predictions' absolute errors (each at most
    `largest`, not a number counting as `largest`), and teaches each level its tree's uncorrected
    prediction. The state arrays are updated in place."""
    rows, trees = linked.shape
    out = np.empty(rows)
    corrected = np.empty(trees)
    for i in range(rows):
        for t in range(trees):
            p = linked[i, t]
            corrected[t] = _corrected(t, p, levels, errors, means, mean_errors, state) if levelled else p
        serving = 0
        for t in range(1, choice.size):
            if choice[t] < choice[serving]:
                serving = t
        out[i] = corrected[serving]
        if not learn[i]:
            continue
        y = targets[i]
        for t in range(choice.size):
            error = abs(corrected[t] - y)
            choice[t] = fading * choice[t] + (error if error <= largest else largest)
        if levelled:
            for t in range(trees):
                _learn(
                    t, linked[i, t], y, levels, errors, means, mean_errors, state, rates, target_rates, decay
                )
    return out
