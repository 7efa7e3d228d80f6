"""`TreeChoice`: which prediction a boosted regressor with side models beside its members serves.

The ensemble of linear members, the single `leaf_model="auto"` regressor (sgt.regressor) and the
forest (sgt.boosted.forest) are each better on different streams, and a blend of two is better than
either where they err apart; the choice serves the candidate with the lowest faded absolute error, as
the single regressor chooses its tree. A batch's errors are filtered at once (the same bits as row by
row).

>>> import numpy as np
>>> choice = TreeChoice()
>>> ensemble, tree, targets = np.zeros(40), np.ones(40), np.ones(40)
>>> served = choice.serve({"ensemble": ensemble, "tree": tree}, targets, np.ones(40, dtype=bool))
>>> float(served[0]), float(served[-1])  # the ensemble first (ties), then the tree, which errs least
(0.0, 1.0)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sgt.regressor import _LARGEST, AUTO_FADING, fade_errors, least_error

__all__ = [
    "CANDIDATES",
    "FILTERED_ROWS",
    "FINE_CANDIDATES",
    "MODELS",
    "REGRESSOR_CANDIDATES",
    "TWO_MODELS",
    "Candidate",
    "TreeChoice",
    "blend",
]

#: the models of a choice without a forest: the members and the single tree
TWO_MODELS = frozenset(("ensemble", "tree"))
#: every model a choice may have: the members, the single tree, the forest and the fine tree
MODELS = frozenset(("ensemble", "tree", "forest", "fine"))


@dataclass(frozen=True)
class Candidate:
    """A prediction a boosted model with side models may serve: `blend(first's, second's, weight)`,
    the models named "ensemble" (the members), "tree" (the single tree), "forest"
    (sgt.boosted.forest) or "fine" (the fine tree: constant leaves on a finer grid)."""

    first: str
    second: str
    weight: float  # on the second model's prediction

    @property
    def models(self) -> frozenset[str]:
        """The models whose predictions it needs (a weight of 0 or 1 needs one only)."""
        if self.weight == 0.0:
            return frozenset((self.first,))
        if self.weight == 1.0:
            return frozenset((self.second,))
        return frozenset((self.first, self.second))

    def of(self, predictions: Mapping[str, Any]) -> Any:
        """Its prediction from the models' (floats or arrays alike: `blend`)."""
        first = predictions[self.first] if self.weight != 1.0 else None
        second = predictions[self.second] if self.weight != 0.0 else None
        return blend(first, second, self.weight)


class TreeChoice:
    """Which prediction a boosted regressor with side models (`single_tree`, `forest`) serves: among its
    candidates, whichever has the lowest absolute error faded by `AUTO_FADING` per learned record (the
    first on ties, so the ensemble before any record), as the single regressor chooses its tree
    (sgt.regressor).

    Without a forest the candidates are the ensemble's prediction, the single tree's, their mean and
    the blends of the two in eighths: candidate k puts `WEIGHTS[k]` on the tree's prediction and the
    rest on the ensemble's. With a forest or a fine tree they are the `REGRESSOR_CANDIDATES` whose models the
    regressor has (all fifteen with the tree, the forest and the fine tree; twelve without the fine
    tree; with the forest alone the ensemble, the forest and their mean), in that order.

    Why these: the ensemble of linear members and the single tree (its four trees, the best serving)
    are each better on different streams (a step-shaped target: the single tree's
    constant leaves; Friedman #1 or heavy tails: the ensemble), and a blend is better than either where
    they err apart (irrelevant features, piecewise-linear targets), the better the closer its weight is
    to the stream's own (micro-scale features, short series); the forest's deep bagged trees fit
    low-dimensional nonlinear targets that neither does (sgt.boosted.forest); the fine tree's
    thresholds fall nearer a step in the target than a 64-bin grid's (sgt.boosted.regressor's
    `FINE_BINS`). A choice saved with the first three candidates alone (before the other blends) keeps
    to them, one saved before the forest to its nine, and one saved before the fine tree to its
    twelve: its number of errors and the side models saved say which. The fine tree never retires.
    docs/decisions.md, "The boosted ensemble", has the figures.

    The forest retires for good (its candidates are then neither counted nor served; the model drops
    it) from `YOUTH` learned records on, at the first learned record after which the serving candidate
    does not need it and the forest's best candidate errs more than `1 + RETIRE_MARGIN` times the
    serving one: where it has stopped leading by that much, its cost buys little (at a margin of 0 it
    retired on 15 of the 19 regression streams of the robustness suite and lost one of them, the
    piecewise-linear target, which it leads again later). `learned` counts the records while it may
    retire; None: it never does (a choice saved before the retirement).

    The single tree retires alike, from `TREE_YOUTH` learned records on, by its own margin
    `TREE_MARGIN` and its own count `tree_learned`
    (None: it never does, as a choice saved before its retirement or made without it): where the
    forest's candidates or the ensemble's lead, the tree's work buys nothing. On a record where both
    may retire the forest is tested first, the tree then among the candidates left.
    """

    #: each candidate's weight of the tree's prediction: the ensemble, the tree, their mean (the
    #: candidates saved before the blends, in that order), then the other eighths
    WEIGHTS = (0.0, 1.0, 0.5, 0.125, 0.25, 0.375, 0.625, 0.75, 0.875)
    CANDIDATES = len(WEIGHTS)
    #: the choices without a forest a save may hold: all the blends, or the first three (saved before
    #: the blends)
    SAVED_SIZES = (3, CANDIDATES)

    #: learned records from which on the forest retires at the first learned record after which the
    #: serving candidate does not need it (the classifier's `SingleChoice.YOUTH`)
    YOUTH = 1000
    #: by how much (relative) the forest's best candidate must err more than the serving one for the
    #: forest to retire
    RETIRE_MARGIN = 0.1
    #: the same for the single tree's best candidate (its blends in eighths are near the ensemble's
    #: prediction: a larger margin would hardly ever retire it)
    TREE_MARGIN = 0.05
    #: learned records from which on the single tree may retire (later than the forest: at 1,000 it
    #: retired on the piecewise-linear target and on Friedman #1 while its blends still led now and
    #: then, 0.6% and 2.3% worse there)
    TREE_YOUTH = 3000

    def __init__(
        self,
        errors: Sequence[float] | None = None,
        models: Collection[str] = TWO_MODELS,
        learned: int | None = None,
        tree_learned: int | None = None,
    ) -> None:
        #: the records learned while the forest may retire (None: it never does, as saved before
        #: retirement; a new choice with a forest starts at 0)
        self.learned: int | None = learned
        if errors is None and learned is None and "forest" in models:
            self.learned = 0
        #: the same for the single tree (None: it never retires, as saved before its retirement; a
        #: model whose tree may retire gives a new choice 0)
        self.tree_learned: int | None = tree_learned
        for count in (self.learned, self.tree_learned):
            if count is not None and (isinstance(count, bool) or count < 0):
                raise ValueError(f"a TreeChoice's count of learned records is at least 0, got {count!r}")
        self.models = frozenset(models)
        if not {"ensemble"} < self.models <= MODELS:
            raise ValueError(
                f"a TreeChoice is of the ensemble and a tree, a forest or a fine tree, got {sorted(models)}"
            )
        if self.models & {"forest", "fine"}:
            offered = tuple(c for c in REGRESSOR_CANDIDATES if c.models <= self.models)
            sizes: tuple[int, ...] = (len(offered),)
        else:
            offered = self.blends()
            sizes = self.SAVED_SIZES
        self.errors = [0.0] * max(sizes) if errors is None else [float(e) for e in errors]
        if len(self.errors) not in sizes:
            raise ValueError(
                f"a TreeChoice of {sorted(self.models)} has {sizes} errors, got {len(self.errors)}"
            )
        #: the candidates, in the order of `errors`
        self.offered: tuple[Candidate, ...] = offered[: len(self.errors)]

    @classmethod
    def blends(cls, first: str = "ensemble", second: str = "tree") -> tuple[Candidate, ...]:
        """`first`'s prediction blended with `second`'s by each of `WEIGHTS` (on the second's), in that
        order: the candidates without a forest (a variant of other `WEIGHTS` has its own), and the
        blends of another pair in the same eighths (the classifier's `MondrianChoice`)."""
        return tuple(Candidate(first, second, w) for w in cls.WEIGHTS)

    def candidates(self, predictions: Mapping[str, float]) -> list[float]:
        """The candidates' predictions, in the order of `errors`, from each of the choice's `models`'
        prediction (keyed by its name: "ensemble", "tree", "forest", "fine")."""
        return [candidate.of(predictions) for candidate in self.offered]

    def serving(self) -> int:
        """The candidate that predicts: the lowest faded error, the first on ties."""
        return least_error(self.errors)

    def learn(self, predictions: Sequence[float], target: float) -> None:
        """`sgt.regressor.fade_errors` of the candidates on one learned record; the forest, then the
        single tree, may then retire (`_may_retire`)."""
        fade_errors(self.errors, predictions, target, AUTO_FADING)
        for side in SIDES:
            count = self._count(side)
            if count is not None:
                self._set_count(side, count + 1)
                self._may_retire(side)

    @property
    def retired(self) -> bool:
        """Whether the ensemble alone is left (the side models retired): the model then drops the
        choice."""
        return self.models == {"ensemble"}

    def _count(self, side: str) -> int | None:
        """The records learned while `side` ("forest", "tree") may retire; None: it may not (it has
        retired, the choice lacks it, or it was saved before its retirement)."""
        if side not in self.models:
            return None
        return self.learned if side == "forest" else self.tree_learned

    def _set_count(self, side: str, count: int | None) -> None:
        if side == "forest":
            self.learned = count
        else:
            self.tree_learned = count

    def _youth(self, side: str) -> int:
        """Learned records from which on `side` may retire."""
        return self.YOUTH if side == "forest" else self.TREE_YOUTH

    def _margin(self, side: str) -> float:
        """By how much (relative) `side`'s best candidate must err more than the serving one for it to
        retire."""
        return self.RETIRE_MARGIN if side == "forest" else self.TREE_MARGIN

    def _may_retire(self, side: str) -> None:
        """Retire `side` if it is old enough, the serving candidate does not need it and its best
        candidate lags the serving one by its margin."""
        count = self._count(side)
        assert count is not None
        if count < self._youth(side):
            return
        serving = self.serving()
        if side in self.offered[serving].models:
            return
        best = min(e for e, c in zip(self.errors, self.offered, strict=True) if side in c.models)
        if best > (1.0 + self._margin(side)) * self.errors[serving]:
            self._retire(side)

    def _retire(self, side: str) -> None:
        """`side` retires for good: its candidates are dropped (never counted or served again)."""
        keep = [k for k, candidate in enumerate(self.offered) if side not in candidate.models]
        self.errors = [self.errors[k] for k in keep]
        self.offered = tuple(self.offered[k] for k in keep)
        self.models = self.models - {side}
        self._set_count(side, None)

    def serve(
        self, predictions: Mapping[str, np.ndarray], targets: np.ndarray, learn: np.ndarray
    ) -> np.ndarray:
        """Each row's served prediction, chosen as the errors stood before the row; each learned row
        then updates the errors, in row order (the one-record loop does the same per record).
        `predictions`: each of the choice's `models`' predictions of the rows, keyed by its name.

        From `FILTERED_ROWS` rows on, the faded errors of every row are computed at once, as a
        first-order recursive filter (scipy.signal.lfilter: e' = f e + error, the same two operations
        in the same order as `learn`, so the same bits), and the choice is their running argmin; the
        errors do not depend on what is served."""
        n = targets.shape[0]
        if n < FILTERED_ROWS:
            return self._serve_rows(predictions, targets, learn)
        from scipy.signal import lfilter  # (here: scipy.signal takes a while to import)

        # [candidates, rows], as `candidates` gives them (the same operations, elementwise)
        offered = np.stack([candidate.of(predictions) for candidate in self.offered])
        learned = np.flatnonzero(learn)
        errors = np.abs(offered[:, learned] - targets[learned])
        errors = np.where(errors <= _LARGEST, errors, _LARGEST)  # (not a number: _LARGEST)
        after = np.empty((len(self.errors), learned.size + 1))  # the errors after 0, 1, ... learned rows
        after[:, 0] = self.errors
        for k in range(len(self.errors)):
            after[k, 1:] = lfilter([1.0], [1.0, -AUTO_FADING], errors[k], zi=[AUTO_FADING * after[k, 0]])[0]
        before = after[:, np.searchsorted(learned, np.arange(n))]  # as each row is served
        serving = np.argmin(before, axis=0)  # (the first on ties, as `serving`)
        active = self._retirements(after, learned, before, serving)
        self.errors = after[active, -1].tolist()
        return offered[serving, np.arange(n)]

    def _retirements(
        self, after: np.ndarray, learned: np.ndarray, before: np.ndarray, serving: np.ndarray
    ) -> np.ndarray:
        """Retire the side models that retire in `serve`'s batch, in order (`after`: the errors after
        each learned row; `learned`: the learned rows; `before`: the errors as each row is served), and
        serve the rows after each retirement among the candidates left (`serving`, in place); the
        other side models' counts move on by the batch's learned rows. Which candidates are left (a
        mask over the candidates the choice had)."""
        offered = self.offered
        active = np.ones(len(offered), dtype=bool)
        # the first learned row (its position among the batch's) at which each side model is tested
        start = {side: 0 for side in SIDES if self._count(side) is not None}
        counts = {side: self._count(side) for side in start}
        while start:
            found = {
                side: self._retirement(side, offered, after, active, start[side], counts[side])
                for side in start
            }
            retiring = [
                (position, SIDES.index(side), side)
                for side, position in found.items()
                if position is not None
            ]
            if not retiring:
                break
            position, _, side = min(retiring)  # (the earliest; on one row, the forest first)
            active &= np.array([side not in c.models for c in offered])
            rows = slice(int(learned[position]) + 1, None)  # (those after it choose among the others)
            masked = np.where(active[:, None], before[:, rows], np.inf)
            serving[rows] = np.argmin(masked, axis=0)
            del start[side]
            self._retire(side)
            for other in start:  # (after the forest, the tree is tested on the same row; after it, the next)
                start[other] = position if SIDES.index(other) > SIDES.index(side) else position + 1
        for side, count in counts.items():
            if side in start:
                assert count is not None
                self._set_count(side, count + learned.size)
        return active

    def _retirement(
        self,
        side: str,
        offered: Sequence[Candidate],
        after: np.ndarray,
        active: np.ndarray,
        start: int,
        count: int | None,
    ) -> int | None:
        """The learned row (its position among the batch's learned rows) after which `side` retires, from
        `serve`'s errors `after` each learned row, among the `active` ones of the candidates `offered`
        (those the choice had before the batch), from position `start`
        on (None: it does not in this batch): the first, from its youth's records learned on (`count`: those
        learned before the batch), after which the serving candidate does not need it and its best
        candidate lags by its margin."""
        assert count is not None
        first = max(start, self._youth(side) - count - 1)  # (the first learned row that makes it old enough)
        if first >= after.shape[1] - 1:
            return None
        mine = np.array([side in c.models for c in offered])
        later = np.where(active[:, None], after[:, first + 1 :], np.inf)
        serving = np.argmin(later, axis=0)
        best = later[serving, np.arange(later.shape[1])]
        lagging = later[mine & active].min(axis=0) > (1.0 + self._margin(side)) * best
        free = np.flatnonzero(~mine[serving] & lagging)
        return None if free.size == 0 else first + int(free[0])

    def _serve_rows(
        self, predictions: Mapping[str, np.ndarray], targets: np.ndarray, learn: np.ndarray
    ) -> np.ndarray:
        """`serve` a row at a time (a few rows: the filter's fixed costs would outweigh its gain)."""
        columns = {name: values.tolist() for name, values in predictions.items()}
        out = np.empty(targets.shape[0])
        for i, (y, learned) in enumerate(zip(targets.tolist(), learn.tolist(), strict=True)):
            candidates = self.candidates({name: values[i] for name, values in columns.items()})
            out[i] = candidates[self.serving()]
            if learned:
                self.learn(candidates, y)
        return out


def blend(ensemble: Any, tree: Any, weight: float) -> Any:
    """The prediction with `weight` on the tree's and the rest on the ensemble's, floats or arrays alike
    (the same operations either way, so the same bits). The mean is 0.5 (e + t), as before the blends."""
    if weight == 0.0:
        return ensemble
    if weight == 1.0:
        return tree
    if weight == 0.5:
        return 0.5 * (ensemble + tree)
    return (1.0 - weight) * ensemble + weight * tree


#: every candidate of the side models both boosted classes have, in the order of a choice's errors:
#: the ensemble, the tree, their mean (the three saved before the blends), the other eighths of the two
#: (the nine saved before the forests), then the forest, its mean with the ensemble and its mean with
#: the tree (the classifier's `SingleChoice` has these)
CANDIDATES: tuple[Candidate, ...] = (
    *TreeChoice.blends(),
    Candidate("ensemble", "forest", 1.0),
    Candidate("ensemble", "forest", 0.5),
    Candidate("tree", "forest", 0.5),
)

#: the regressor's candidates after `CANDIDATES` (the twelve saved before the fine tree): the fine tree,
#: its mean with the forest and its mean with the single tree
FINE_CANDIDATES: tuple[Candidate, ...] = (
    Candidate("ensemble", "fine", 1.0),
    Candidate("fine", "forest", 0.5),
    Candidate("tree", "fine", 0.5),
)

#: every candidate of the regressor's choice, in the order of its errors
REGRESSOR_CANDIDATES = CANDIDATES + FINE_CANDIDATES

#: the side models that may retire, in the order they are tested on a record
SIDES = ("forest", "tree")

#: `TreeChoice.serve` filters the errors of batches of at least this many rows (fewer: row by row)
FILTERED_ROWS = 32
