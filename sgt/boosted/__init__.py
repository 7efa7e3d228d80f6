"""Online gradient boosting of Stochastic Gradient Trees, with online bagging and drift detection.

An ensemble of M *members*, each one SGT per output (one for regression; K - 1 for K classes, as in
SGTClassifier's committee, while fewer than three classes are known) or, for three classes or more,
by default one multi-output SGT (sgt.multioutput) with a value per class (see BoostedClassifier's
`multiclass_trees`). With learning rate eta and base score b (regression: the loss's base score of
the first target; classification: 0), the ensemble's raw score is

    F(x) = b + eta f_1(x) + eta f_2(x) + ... + eta f_M(x)

and member m learns from the gradient and Hessian of the loss at F_{m-1}(x) + f_m(x), where F_{m-1}
is the sum of the members before it: the member fits, by its own Newton steps, what the members before
it leave unexplained (boosting), and its contribution to F is shrunk by eta. Classification uses the
softmax over classes at that point (the member's trees see the joint gradient, as in SGTClassifier).

The package's parts, each with one concern:

- `member`: one boosting stage (`Member`) and the context it is built with (`MemberContext`);
- `bagging`: each member's Poisson weight of each record (online bagging), a pure function of
  (seed, record, member), so independent of batching;
- `policy`: the drift response's variants as one frozen value (`DriftPolicy`, `Youth`) and the
  constants;
- `response`: `DriftResponse`, the two drift tests and the policy's answers to warnings and drifts
  (a background ensemble, replacement whole), which the ensemble carries out;
- `ensemble`, `engine`: the ensembles' state and the hooks the concrete classes give; the exact span
  engine that runs a batch as the one-record loop would (`spans`: what the members share over a
  batch);
- `classifier`, `regressor`: `BoostedClassifier` and `BoostedRegressor` (`residual`: the regressor's
  correction of its predictions by a recent mean of its residuals).

Batch learning, the one-record loop and save/restore give the same model byte for byte. Why the
defaults are what they are: docs/decisions.md, "The boosted ensemble"; the figures: BENCHMARKS.md,
section 5.

References: Gouk, Pfahringer and Frank, "Stochastic Gradient Trees", ACML 2019; Oza and Russell,
"Online bagging and boosting", AISTATS 2001; Gomes et al., "Adaptive random forests for evolving data
stream classification", Machine Learning 106, 2017.

>>> from sgt.boosted import BoostedClassifier
>>> model = BoostedClassifier(n_members=2)
>>> model.learn_many([[0.1], [0.9]], [0, 1])
>>> model.n_trees, model.n_drifts
(2, 0)
"""

from __future__ import annotations

from sgt.boosted.classifier import BoostedClassifier
from sgt.boosted.policy import (
    ALARM_PERIOD,
    BACKGROUND_LIFE,
    BINARY_DELTA,
    BINARY_MEMBERS,
    DRIFT_PERIOD,
    MULTICLASS_DELTA,
    MULTICLASS_LINEAR_START,
    MULTICLASS_MEMBERS,
    MULTICLASS_TREES,
    REPLAY,
    REPLAY_WARNED,
    DriftPolicy,
    Youth,
)
from sgt.boosted.regressor import BoostedRegressor

__all__ = [
    "ALARM_PERIOD",
    "BACKGROUND_LIFE",
    "BINARY_DELTA",
    "BINARY_MEMBERS",
    "DRIFT_PERIOD",
    "MULTICLASS_DELTA",
    "MULTICLASS_LINEAR_START",
    "MULTICLASS_MEMBERS",
    "MULTICLASS_TREES",
    "REPLAY",
    "REPLAY_WARNED",
    "BoostedClassifier",
    "BoostedRegressor",
    "DriftPolicy",
    "Youth",
]
