"""A single SGT that answers concept drift: the opt-in drift response of the single trees.

`AdaptiveSGTClassifier` and `AdaptiveSGTRegressor` learn exactly what `SGTClassifier` (with
``leaf_bayes=False``) and `SGTRegressor` (with ``leaf_model="adaptive"``) learn, one tree (a committee
for more than two classes), until a drift is detected: the same trees bit for bit, and with
``proba="tree"`` the same probabilities. With ``proba="calibrated"`` the probabilities differ slightly
(by up to 0.01 on a checkerboard): the calibration learns each record with the scores it was predicted
with, as the boosted classifier's does, where the single tree's takes the scores it learns the record
with, which differ while a bin grid grows.

They watch their own prequential errors with the boosted ensemble's drift response (sgt.boosted): a
Page-Hinkley warning starts a background tree that learns every later record beside the main one, and a
drift replaces the main tree by it, counted by `n_drifts` (a drift with no warning before it starts a
fresh tree, which replaces the main one once it makes fewer errors over a period). Each is built of the
boosted ensemble's parts (sgt.boosted): an ensemble of one member with learning rate 1 and no bagging,
which is the single tree's own model, answering drift by the one-tree policy
(`ADAPTIVE_CLASSIFIER_POLICY`, `ADAPTIVE_REGRESSOR_POLICY` in sgt.boosted.policy). They are siblings of
`BoostedClassifier` and `BoostedRegressor`, not subclasses: the ensemble's parameters are not theirs.
Every guarantee of the ensemble holds (batch ≡ loop under any batching, save/restore at any point
continues byte for byte).

Like River's Hoeffding adaptive trees beside its Hoeffding trees, the drift response is a class of its
own rather than a switch on the single tree: it changes what the model is (two trees while a warning
lasts, a replacement on drift) and its cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from sgt.base import TreeGroup
from sgt.bayes_moments import PSEUDO_WEIGHT
from sgt.boosted.classifier import _ClassifierEnsemble
from sgt.boosted.member import Member
from sgt.boosted.policy import ADAPTIVE_CLASSIFIER_POLICY, ADAPTIVE_REGRESSOR_POLICY
from sgt.boosted.regressor import _RegressorEnsemble
from sgt.classifier import BLIND_SPLIT
from sgt.losses import Loss
from sgt.residual import ResidualLevel

__all__ = ["AdaptiveSGTClassifier", "AdaptiveSGTRegressor"]

# the ensemble's parameters that make it one plain tree; fixed, so not parameters of these classes
_ONE_TREE: dict[str, Any] = {"n_members": 1, "learning_rate": 1.0, "poisson_rate": None, "seed": 0}


class _OneTree:
    """What both adaptive classes share: parameters and views of one tree instead of an ensemble."""

    _members: list[Member]

    def _without_ensemble(self, params: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in params.items() if k not in _ONE_TREE}

    def _tree_groups(self) -> list[TreeGroup]:
        """The views show the tree in use (not a background tree learning since a warning)."""
        return [TreeGroup("", self._members[0].trees)]

    def _view_heading(self) -> str | None:
        return None


class AdaptiveSGTClassifier(_OneTree, _ClassifierEnsemble):
    """SGTClassifier with a drift response: a warning grows a background tree, a drift swaps it in.

    Parameters
    ----------
    drift_threshold
        Page-Hinkley alarm level on the 0/1 prequential errors (a warning at half of it); None: no
        drift detection (then the model is SGTClassifier's). Default 50.
    drift_delta
        Tolerated rise of the error rate before it counts towards the alarm. Default 0.02.

    The other parameters are SGTClassifier's, with its defaults (its blind splits too), but
    ``leaf_bayes``: the leaves have no naive Bayes. ``proba`` is ``"calibrated"`` (the tree's softmax
    calibrated online, mixed with a young naive Bayes, as SGTClassifier's default) or ``"tree"`` (the
    softmax alone).

    Examples
    --------
    >>> import numpy as np
    >>> from sgt import AdaptiveSGTClassifier
    >>> rng = np.random.default_rng(3)
    >>> X = rng.uniform(-1, 1, size=(12000, 2))
    >>> y = np.where(np.arange(12000) < 6000, X[:, 0] > 0, X[:, 0] < 0)  # the concept flips at 6,000
    >>> model = AdaptiveSGTClassifier(warm_up=200)
    >>> predicted = model.predict_learn_many(X, y).argmax(axis=1)
    >>> model.n_drifts >= 1, bool((np.array(model.classes_)[predicted] == y)[-2000:].mean() > 0.9)
    (True, True)
    """

    #: SGTClassifier's blind split (BaseSGT._blind; a model saved before the adaptive classifier had it
    #: restores without it)
    _blind: ClassVar[tuple[float, float] | None] = BLIND_SPLIT
    #: SGTClassifier's weight of the young naive Bayes' pseudo record (``proba="calibrated"``)
    _bayes_pseudo: ClassVar[float] = PSEUDO_WEIGHT

    def __init__(
        self,
        drift_threshold: float | None = 50.0,
        drift_delta: float = 0.02,
        delta: float = 1e-3,
        grace_period: int = 100,
        lambda_: float = 0.1,
        gamma: float = 0.1,
        bins: int = 64,
        warm_up: int = 1000,
        max_depth: int | None = None,
        feature_names: Sequence[str] | None = None,
        nominal: Sequence[str] = (),
        max_categories: int | None = None,
        grace_start: int = 10,
        leaf_model: str = "linear",
        linear_lambda: float = 0.01,
        max_bytes: int | None = None,
        linear_gate: float | None = 1.5,
        proba: str = "calibrated",
    ) -> None:
        _ClassifierEnsemble.__init__(
            self,
            drift_threshold=drift_threshold,
            drift_delta=drift_delta,
            delta=delta,
            grace_period=grace_period,
            lambda_=lambda_,
            gamma=gamma,
            bins=bins,
            warm_up=warm_up,
            max_depth=max_depth,
            feature_names=feature_names,
            nominal=nominal,
            max_categories=max_categories,
            grace_start=grace_start,
            leaf_model=leaf_model,
            linear_lambda=linear_lambda,
            max_bytes=max_bytes,
            linear_start=0,  # the single tree's linear terms step from the first record, as SGTClassifier's
            multiclass_trees="per-class",  # SGTClassifier's committee
            policy=ADAPTIVE_CLASSIFIER_POLICY,  # a fresh tree must win first, no replay
            linear_gate=linear_gate,  # SGTClassifier's, on its one member's trees
            proba=proba,
            **_ONE_TREE,
        )

    def get_params(self) -> dict[str, Any]:
        params = self._without_ensemble(_ClassifierEnsemble.get_params(self))
        # always 0 and "per-class" (see __init__)
        del params["linear_start"], params["multiclass_trees"]
        return {**params, "linear_gate": self.linear_gate}

    @classmethod
    def _params_from_saved(cls, params: dict[str, Any], loss: Any) -> dict[str, Any]:
        # no linear_start to default (BoostedClassifier's saves before it had one); saved before the
        # gate, its terms are all kept, as then; a save without `proba` was made with "tree" (the only
        # probabilities before the parameter, and left out of saves as SGTClassifier's "tree" is)
        return {**params, "linear_gate": params.get("linear_gate"), "proba": params.get("proba", "tree")}


class AdaptiveSGTRegressor(_OneTree, _RegressorEnsemble):
    """SGTRegressor with a drift response: a warning grows a background tree, a drift swaps it in.

    Parameters
    ----------
    drift_threshold
        Page-Hinkley alarm level on the absolute errors, each divided by the mean absolute error
        before it (a warning at half of it); None: no drift detection. Default 50.
    drift_delta
        Tolerated rise of that relative error before it counts towards the alarm. Default 0.2.

    The other parameters are SGTRegressor's, with its defaults.

    Examples
    --------
    >>> import numpy as np
    >>> from sgt import AdaptiveSGTRegressor
    >>> rng = np.random.default_rng(4)
    >>> X = rng.uniform(-1, 1, size=(12000, 1))
    >>> y = np.where(np.arange(12000) < 6000, 5.0, -5.0) * X[:, 0]  # the slope flips at 6,000
    >>> model = AdaptiveSGTRegressor(warm_up=200)
    >>> predictions = model.predict_learn_many(X, y)
    >>> model.n_drifts >= 1, bool(np.abs(predictions - y)[-2000:].mean() < 0.5)
    (True, True)
    """

    def __init__(
        self,
        drift_threshold: float | None = 50.0,
        drift_delta: float = 0.2,
        delta: float = 1e-3,
        grace_period: int = 100,
        lambda_: float = 0.1,
        gamma: float = 0.1,
        bins: int = 64,
        warm_up: int = 1000,
        max_depth: int | None = None,
        feature_names: Sequence[str] | None = None,
        nominal: Sequence[str] = (),
        loss: Loss | None = None,
        base_score: float | None = None,
        max_categories: int | None = None,
        grace_start: int = 10,
        leaf_model: str = "adaptive",
        linear_lambda: float = 0.01,
        max_bytes: int | None = None,
        interval_coverages: Sequence[float] = (),
    ) -> None:
        _RegressorEnsemble.__init__(
            self,
            drift_threshold=drift_threshold,
            drift_delta=drift_delta,
            delta=delta,
            grace_period=grace_period,
            lambda_=lambda_,
            gamma=gamma,
            bins=bins,
            warm_up=warm_up,
            max_depth=max_depth,
            feature_names=feature_names,
            nominal=nominal,
            loss=loss,
            base_score=base_score,
            max_categories=max_categories,
            grace_start=grace_start,
            leaf_model=leaf_model,
            linear_lambda=linear_lambda,
            max_bytes=max_bytes,
            interval_coverages=interval_coverages,
            policy=ADAPTIVE_REGRESSOR_POLICY,
            **_ONE_TREE,
        )
        if type(self.loss).link is Loss.link:  # SGTRegressor's residual level (sgt.residual), on its tree
            self._residual = ResidualLevel()

    def get_params(self) -> dict[str, Any]:
        return self._without_ensemble(_RegressorEnsemble.get_params(self))
