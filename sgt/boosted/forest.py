"""The forests beside the boosted members: bagged SGTs that split fast, averaged instead of boosted.

A boosted ensemble's members are shallow where no single split gains (an XOR, a checkerboard, two
interleaved moons): each member fits what the ones before it leave, shrunk, and the split test of a
residual that no one split explains is slow to pass. A random forest grows each tree deep on its own
bootstrap and averages them; on low-dimensional nonlinear data that is what River's ARF and AMF do
better. So the boosted classes keep, beside their members and single tree, a *forest*: the same
engine with `_averaged` members (each learns the target at the base score, not the residual of the
members before it; the model is their mean), each weighing the records by its own Poisson(1) draws,
and a split confidence and grace period that let a leaf split on few records. The model then serves
whichever of its candidates has erred least (sgt.boosted.classifier's `SingleChoice`,
sgt.boosted.tree_choice's `TreeChoice`).

The settings below were chosen on the robustness suite (docs/decisions.md, "The boosted ensemble").

>>> from sgt.boosted.classifier import ForestClassifier
>>> forest = ForestClassifier(**CLASSIFIER_FOREST)
>>> forest.learn_many([[0.1], [0.9]], [0, 1])
>>> forest.n_trees, forest.learning_rate
(16, 0.0625)
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "CLASSIFIER_FOREST",
    "CLASSIFIER_FOREST_BOUND_BLOCK",
    "REGRESSOR_FOREST",
    "Averaged",
    "smaller_depth",
]

#: the classifier's forest: sixteen members of constant leaves, split confidence 0.2 and grace period 10,
#: each bagged, summed at a sixteenth each, at most 8 deep and within 32 MB (unbounded, a noisy stream grew
#: it by 2.4 kB a record: 47 MB over SEA's 20,000; a budget alone costs most where it binds, so the depth
#: bounds it first on few features); no drift test of its own (it retires once the members lead, see
#: `SingleChoice`). Chosen on the robustness suite over ten members of linear leaves: at or above the
#: best peer ensemble on 15 of its 20 classification streams instead of 12 (the timestamped binary
#: stream, label noise 10%, the moons), none of the benchmark and drift streams 0.1 point lower, about
#: 16 MB after SEA's 20,000 as before. It costs most of the CPU where it serves, most of it in attempts of
#: leaves at the depth bound, which never split: those lengthen their blocks (`CLASSIFIER_FOREST_BOUND_BLOCK`)
#: (docs/decisions.md, "The boosted ensemble")
CLASSIFIER_FOREST: dict[str, Any] = {
    "n_members": 16,
    "learning_rate": 1 / 16,
    "delta": 0.2,
    "grace_period": 10,
    "lambda_": 0.1,
    "leaf_model": "constant",
    "poisson_rate": 1.0,
    "drift_threshold": None,
    "max_depth": 8,
    "max_bytes": 32_000_000,
    "single_tree": False,
    "forest": False,
    "mondrian": False,
}

#: the classifier's forest's `Params.bound_block`: a leaf at its depth bound (two thirds of its attempts on
#: SEA) doubles its blocks up to four grace periods, since it only refines its value (and starts over at one
#: when its value moves: a drift). SEA's 20,000 records in batches of 1,000 (process CPU): the classifier
#: 16,700 -> 26,100 records/s, 20 times ARF's speed, SEA and its drift streams within 0.06 point; at or above
#: the best peer ensemble on 14 of the suite's 20 classification streams instead of 15 (the moons 93.34
#: against SRP's 93.36, 93.38 before: two records in 10,000). Two or eight grace periods: 14, sixteen 13
#: (docs/decisions.md, "The boosted ensemble")
CLASSIFIER_FOREST_BOUND_BLOCK = 4

#: the regressor's forest: ten bagged members of split confidence 0.1 and grace period 20, summed at a
#: tenth each (the regressor's other defaults: linear leaves, the residual level, the drift test),
#: within 32 MB (unbounded, stress-irrelevant grew it to 263 MB in 10,000 records; unlike the
#: classifier's, no depth bound: at most 8 deep lost more where the forest serves than the budget
#: alone); it runs in its own feature space (its budget cuts its batches as its own loop would) and
#: retires once it lags (`TreeChoice`)
REGRESSOR_FOREST: dict[str, Any] = {
    "n_members": 10,
    "learning_rate": 0.1,
    "delta": 0.1,
    "grace_period": 20,
    "poisson_rate": 1.0,
    "max_bytes": 32_000_000,
    "single_tree": False,
    "forest": False,
    "fine_tree": False,
}


class Averaged:
    """A mixin over a boosted class: its members are averaged, not boosted (`_Core._averaged`); with a
    learning rate of 1 / n_members its raw score is the members' mean. Every member takes its whole
    Newton step (the regressor's damping is for members stepping on the residuals of the ones before
    them)."""

    _averaged: ClassVar[bool] = True

    def _step_share(self, position: int) -> float:
        return 1.0


def smaller_depth(forest: int | None, ensemble: int | None) -> int | None:
    """A forest's depth bound beside its ensemble's: the smaller of the two (None: unbounded).

    >>> smaller_depth(8, None), smaller_depth(8, 5), smaller_depth(None, 6), smaller_depth(None, None)
    (8, 5, 6, None)
    """
    bounds = [d for d in (forest, ensemble) if d is not None]
    return min(bounds) if bounds else None
