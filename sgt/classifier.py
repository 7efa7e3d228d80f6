"""SGTClassifier: the paper's softmax committee of K - 1 trees (section 4.1)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from sgt.base import ROW_BY_ROW_MAX, BaseSGT, _check_real
from sgt.bayes import LOG_RATIO_BOUND, NaiveBayes
from sgt.bayes_moments import PSEUDO_WEIGHT
from sgt.calibration import Calibrator
from sgt.explain import Explanation, explanations
from sgt.features import Regrid
from sgt.leaf_bayes import LeafBayes, trees_label
from sgt.leaf_bayes_batch import Log, replay
from sgt.leafwise import Watched
from sgt.linear_term import CLASSIFIER_LEVEL_STEP_BOUND
from sgt.retirement import Retirement, Tournament
from sgt.smoothing import MODES, Smoother
from sgt.softmax import softmax_one, softmax_rows, softmax_with_reference
from sgt.tree import LeafInputs, Params

__all__ = ["PROBA_MODES", "SGTClassifier", "softmax_with_reference"]

#: a leaf whose predictions are near a coin toss (a Gini impurity of 0.49 or more: two classes within
#: about 0.43 to 0.57) and that found no significant split in a grace period of records splits anyway: at
#: its best split, or at a median where none lowers the loss (Params.blind_after, blind_impurity; why:
#: docs/decisions.md, "The single tree")
BLIND_SPLIT = (1.0, 0.49)

#: how the classifier makes probabilities (see SGTClassifier's ``proba``)
PROBA_MODES = ("calibrated", "mixed", *MODES)
#: when the naive Bayes that ``proba="calibrated"`` mixes in while the trees are young retires: once the
#: trees' log loss over every learned record is LEAD nats below its own, or from 5,000 records on once
#: the trees' is at most its own; while it leads, it stays (docs/decisions.md)
YOUNG_BAYES = Tournament(lead=LOG_RATIO_BOUND, records=5000, least=200)
#: the rule of a young naive Bayes saved before `Tournament` (its state has no "lead"): once its weight
#: in the mixture is at its floor, exp(-LOG_RATIO_BOUND), or after 5,000 records at the latest
YOUNG_BAYES_BOUNDED = Retirement(ratio=LOG_RATIO_BOUND, records=5000)


class SGTClassifier(BaseSGT):
    """Online classifier: one Stochastic Gradient Tree per class but one.

    The first class seen is the reference class with a fixed logit of 0 (the paper hard-wires
    f_k = 0); every further class c gets a tree f_c, and P(c | x) = softmax(0, f_2(x), ...). With
    two classes this is a single tree with the logistic loss. Each tree learns from the gradient
    p_c - y_c and the diagonal Hessian p_c (1 - p_c) of the cross-entropy (Eqs. 21-22), all computed
    from the same joint prediction. A class first seen mid-stream adds a tree starting at 0; the
    other trees carry on untouched. Labels can be any JSON scalar: strings, integers, floats, bools.
    Beyond the paper, a leaf whose predictions stay near a coin toss for a grace period without a
    significant split splits anyway (`BLIND_SPLIT`): where no single split gains, as on an XOR, a tree
    that waits for evidence never splits.

    Parameters
    ----------
    delta
        Significance level of the split test (p < delta to act). Default 1e-3 (paper: 1e-7).
    grace_period
        Instances a leaf collects between split attempts. Default 100 (paper: 200).
    lambda_
        L2 regularisation of leaf values, added to the mean Hessian. Default 0.1.
    gamma
        Complexity penalty per new leaf, per instance (gamma |Q| / n). Default 0.1 (paper: 1).
        `sgt.PAPER_DEFAULTS` holds the paper's settings; BENCHMARKS.md has the measurements behind ours.
    bins
        Equal-width bins per numeric feature. Default 64.
    warm_up
        Finite values of each numeric feature during which its bin grid may still grow to hold a
        value outside it (see sgt.features); later ones are clipped into the end bins. It never
        delays learning: numeric splits are possible from the first attempt. Default 1000.
    grace_start
        Instances before the root's first split attempt; a new leaf's first block is
        grace_start * 2^depth, and each attempt that leaves a leaf a leaf doubles its block, up to
        grace_period. Default 10 (grace_period gives the paper's constant blocks).
    leaf_model
        "linear" (default): a leaf predicts its value plus a linear term in the numeric features
        (their bin centres on the grid), fitted by Newton steps from the same gradients and
        Hessians at every attempt; a new leaf starts from its parent's term. "constant": the
        paper's leaves, a value only. "adaptive": each leaf serves its linear term or its constant,
        whichever predicted its records better so far (sgt.linear_term.LinearTermSteps._choose; the
        regressor's default, not the classifier's: BENCHMARKS.md section 9).
    linear_lambda
        L2 regularisation of the linear term's Newton steps (on mean Hessians). Default 0.01.
    max_depth
        Optional depth limit; a leaf at the limit only updates its value.
    feature_names
        Names of the columns when records are arrays or sequences (default x0, x1, ...).
    nominal
        Names of features to treat as categories even when their values are numbers.
    max_categories
        Optional bound on the categories of each nominal feature. The first `max_categories`
        learned keep their own codes; every later one shares a single "other" code (shown as
        None in `to_dict`). Without it, a feature with ever-new values (an id, a timestamp
        string) grows every leaf's statistics and, once split on, the number of leaves without
        limit.
    max_bytes
        Optional memory budget in bytes, which `nbytes` keeps to (every model class takes it): at
        it, the least promising leaves stop gathering split statistics and never split again, but
        still predict and learn their values (`n_inactive` counts them). Exact like the rest: any
        batching and a restore give the same model. None (default): unbounded.
    proba
        How probabilities are made; the trees learn the same in every mode. ``"calibrated"``
        (default): the trees' softmax with a temperature and a bias per class fitted online on the log
        loss of every learned record (sgt.calibration; Platt scaling with two classes): it starts as
        the softmax, and cools it when it is overconfident, as after a concept change, at about 1.05
        times the time per record. While the trees are young it is mixed with a naive Bayes, as
        ``"mixed"`` mixes the raw softmax, which retires for good once the trees' log loss over every
        learned record is 10 nats below its own, or from 5,000 learned records on once the trees' is at
        most its own, and not before 200 records (`YOUNG_BAYES`); from then on the calibrated softmax
        is published alone, at no extra cost. ``"tree"``: the trees' softmax (the paper's model).
        ``"mixed"``: the trees' softmax mixed with a Gaussian naive Bayes over the numeric features
        (the leaf model of the Hoeffding trees; a feature of two values is a Bernoulli variable), each
        weighted by its prequential log loss so far (sgt.bayes): the naive Bayes carries the first
        few hundred records, while the trees are young, and the trees the rest; better calibrated on
        short and drifting streams, at about 1.15 times the time per record in batches and twice
        one record at a time. ``"blend"``: every node also counts the classes of the records learned
        through it; a record's class frequencies at its leaf are smoothed towards all its ancestors'
        (Hierarchical Gradient Smoothing, one weight per node fitted online on the log loss), and
        blended with the trees' softmax, whose weight (also fitted) counts most while a leaf has seen
        few records. ``"hgs"``: the smoothed counts alone. docs/library.md has the measurements. A
        model saved without the naive Bayes or smoothing state (``"tree"``, or before these modes
        existed) restores as ``"tree"``; so does one saved without calibration state.
    linear_gate
        A number t > 0 (default 1.5), or None: with linear leaves, each attempt first tests the leaf's
        linear term on the leaf's new block, which the term was not fitted on, and drops it (its mean
        moves into the value) when the block's loss is lower without it by more than t standard
        errors (a one-sided t test on the second-order loss change of each record). It guards against
        a term fitted where the classes do not vary linearly, which the leaf's children would inherit
        (Bananas' Brier score 0.290 without it, 0.283 with it). None: every term is kept (the model
        before the gate; a model saved before it restores so). It costs about 1% of the batched time.
    leaf_bayes
        True (default): every leaf also keeps a Gaussian naive Bayes over the numeric features, and
        where it has predicted the leaf's learned records better than the trees (more often right),
        the published probabilities are the mean of the model's and its own (sgt.leaf_bayes): curved
        class boundaries inside a leaf, from its first records (+0.71 points over 45 classification
        streams). A leaf whose naive Bayes has been right 50 times fewer than the trees stops keeping
        it. False: none (a model saved before the parameter restores so); so too with a memory budget
        (`max_bytes`), which bounds the trees' statistics. docs/decisions.md has the measurements.
        Exact like the rest; a batch replays its part on arrays once its trees ran
        (sgt.leaf_bayes_batch).

    Examples
    --------
    >>> import numpy as np
    >>> from sgt import SGTClassifier
    >>> rng = np.random.default_rng(1)
    >>> X = rng.uniform(0, 1, size=(5000, 2))
    >>> y = (X[:, 0] > 0.5).astype(int)
    >>> model = SGTClassifier(warm_up=200)
    >>> proba = model.predict_learn_many(X, y)       # prequential: predict each row, then learn it
    >>> accuracy = (np.array(model.classes_)[proba.argmax(axis=1)] == y)[1000:].mean()
    >>> bool(accuracy > 0.97), model.n_splits <= 4
    (True, True)
    >>> model.predict_one({"x0": 0.9, "x1": 0.1})
    1
    """

    #: a leaf near a coin toss that found no split for this many grace periods splits blind
    #: (`BLIND_SPLIT`: Params.blind_after, blind_impurity); a model saved before it restores without
    _blind: ClassVar[tuple[float, float] | None] = BLIND_SPLIT
    #: the weight of the pseudo record in the naive Bayes moments of a new model (sgt.bayes_moments); a
    #: model saved before it restores with weight 1 (the saved naive Bayes state has no "pseudo")
    _bayes_pseudo: ClassVar[float] = PSEUDO_WEIGHT

    def __init__(
        self,
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
        proba: str = "calibrated",
        linear_gate: float | None = 1.5,
        max_bytes: int | None = None,
        leaf_bayes: bool = True,
    ) -> None:
        if proba not in PROBA_MODES:
            raise ValueError(f"proba must be one of {', '.join(map(repr, PROBA_MODES))}, got {proba!r}")
        if linear_gate is not None:
            _check_real("linear_gate", linear_gate, low=0.0, low_open=True, allowed="None or a number > 0")
        if not isinstance(leaf_bayes, bool):
            raise ValueError(f"leaf_bayes must be True or False, got {leaf_bayes!r}")
        super().__init__(
            delta,
            grace_period,
            lambda_,
            gamma,
            bins,
            warm_up,
            max_depth,
            feature_names,
            nominal,
            max_categories=max_categories,
            grace_start=grace_start,
            leaf_model=leaf_model,
            linear_lambda=linear_lambda,
            max_bytes=max_bytes,
        )
        self._classes: list[Any] = []
        self._class_index: dict[Any, int] = {}
        self._incoming: dict[int, Any] = {}
        self.proba = proba
        self.linear_gate = None if linear_gate is None else float(linear_gate)
        self._smoother = Smoother() if proba in ("blend", "hgs") else None
        self.leaf_bayes = leaf_bayes
        # (not within a memory budget, which bounds the trees' statistics alone: none, as the boosted
        # ensembles' side models)
        self._leaf_bayes = LeafBayes(self.bins) if leaf_bayes and max_bytes is None else None
        # (trees, their splits) when the leaf naive Bayes last forgot split leaves (`_forget_split_leaves`)
        self._leaf_splits = (0, 0)
        # while a batch runs with the leaf naive Bayes: what its hooks saw, replayed once the trees ran
        self._leaf_log: Log | None = None
        # (a feature of two values is a Bernoulli variable to the naive Bayes of a new model)
        self._bayes = (
            NaiveBayes(self.bins, two_valued=True, pseudo=self._bayes_pseudo)
            if proba in ("mixed", "calibrated")
            else None
        )
        self._calibrator = Calibrator() if proba == "calibrated" else None
        # with the calibration the naive Bayes is young: it retires for good once the trees lead it
        self._retirement: Retirement | Tournament | None = YOUNG_BAYES if proba == "calibrated" else None
        if self._bayes is not None and proba == "calibrated":
            self._bayes.lead = 0.0  # the tournament's score
        # while a batch runs with the calibration: the rows learned on the one-record path, by row
        self._calibrating: _Calibrating | None = None
        # while a chunked batch runs with the naive Bayes: the trees' softmax of its event rows as learned
        self._mixing: _Mixing | None = None

    @property
    def classes_(self) -> list[Any]:
        """Labels in order of first appearance; the columns of the probability arrays."""
        return list(self._classes)

    def get_params(self) -> dict[str, Any]:
        return {
            **super().get_params(),
            "proba": self.proba,
            "linear_gate": self.linear_gate,
            "leaf_bayes": self.leaf_bayes,
        }

    @classmethod
    def _params_from_saved(cls, params: dict[str, Any], loss: Any) -> dict[str, Any]:
        params.setdefault("linear_gate", None)  # saved before the gate: its terms are all kept, as then
        params.setdefault("leaf_bayes", False)  # saved before the leaves' naive Bayes, or without it
        return super()._params_from_saved(params, loss)

    def _params(self) -> Params:
        return dataclasses.replace(
            super()._params(), linear_gate=self.linear_gate, level_step_bound=CLASSIFIER_LEVEL_STEP_BOUND
        )

    def _saved_params(self) -> dict[str, Any]:
        # without smoothing state a model restores as "tree": its bytes stay those of the format
        # before smoothing, so a model saved by an earlier release saves back to the same bytes
        params = super()._saved_params()
        if self.proba == "tree":
            params.pop("proba", None)  # absent where a subclass has no such parameter (the ensemble)
        if self.linear_gate is None:
            params.pop("linear_gate", None)  # so too without the gate (the parameter's absence means None)
        if not self.leaf_bayes:
            params.pop("leaf_bayes", None)  # (absent: the bytes of the format before the parameter)
        return params

    @property
    def nbytes(self) -> int:
        """Bytes of the model's live arrays, the smoothing's or the naive Bayes' statistics included."""
        return self._side_nbytes() + self._leaf_nbytes()

    def _side_nbytes(self) -> int:
        if self._bayes is not None:
            return super().nbytes + self._bayes.nbytes()
        if self._smoother is None:
            return super().nbytes
        self._smoother.sync(self._trees, len(self._classes))
        return super().nbytes + self._smoother.nbytes()

    def _leaf_nbytes(self) -> int:
        if self._leaf_bayes is None:
            return 0
        self._forget_split_leaves()
        return self._leaf_bayes.nbytes(len(self._classes), self._layout.n_features)

    def _state_extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"classes": list(self._classes)}
        if self._smoother is not None:
            self._smoother.sync(self._trees, len(self._classes))  # equal models, equal bytes
            extra["smoothing"] = self._smoother.state()
        if self._bayes is not None:
            extra["bayes"] = self._bayes.state()
        if self._calibrator is not None:
            extra["calibration"] = self._calibrator.state()
        return extra

    def _state_arrays(self) -> list[tuple[str, np.ndarray]]:
        if self._bayes is not None:
            arrays = self._bayes.arrays()
        else:
            arrays = [] if self._smoother is None else self._smoother.arrays()
        if self._leaf_bayes is not None:  # every cell, as the model now has classes and features
            self._forget_split_leaves()
            arrays += self._leaf_bayes.arrays(len(self._trees), len(self._classes), self._layout.n_features)
        return arrays

    def _restore_extra(self, extra: dict[str, Any]) -> None:
        classes = [_check_label(label) for label in extra["classes"]]
        if len(self._trees) != max(0, len(classes) - 1):
            raise ValueError(
                f"{len(classes)} classes need {max(0, len(classes) - 1)} trees, found {len(self._trees)}"
            )
        self._classes = classes
        self._class_index = {label: k for k, label in enumerate(classes)}

    def _restore_arrays(self, extra: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        if self._calibrator is not None and "calibration" in extra:
            self._calibrator = Calibrator.restore(extra["calibration"], len(self._classes))
            # saved after its naive Bayes retired, or before the calibration had one: none from now on
            self._bayes = self._restored_bayes(extra, arrays) if "bayes" in extra else None
            if self._bayes is not None and self._bayes.lead is None:
                self._retirement = YOUNG_BAYES_BOUNDED  # saved before the tournament: its rule then
        elif self._bayes is not None and "bayes" in extra and self._calibrator is None:
            self._bayes = self._restored_bayes(extra, arrays)
        elif "smoothing" not in extra:
            # saved with proba="tree", or before the calibration, smoothing or the naive Bayes existed:
            # nothing to calibrate, smooth or mix with, so the model goes on exactly as it was
            self.proba, self._smoother, self._bayes, self._calibrator = "tree", None, None, None
        elif self._smoother is not None:
            self._smoother = Smoother.restore(extra["smoothing"], arrays, self._trees, len(self._classes))
        if self._leaf_bayes is not None and "leaf_bayes.keys" in arrays:
            self._leaf_bayes = LeafBayes.restore(
                self.bins, arrays, len(self._trees), len(self._classes), self._layout.n_features
            )

    def _restored_bayes(self, extra: dict[str, Any], arrays: dict[str, np.ndarray]) -> NaiveBayes:
        bayes = NaiveBayes.restore(self.bins, extra["bayes"], arrays)
        k, f = bayes.counts.shape
        if k != len(self._classes) or f > self._layout.n_features:
            raise ValueError(
                f"naive Bayes statistics of {k} classes and {f} features do not fit the model's "
                f"{len(self._classes)} classes and {self._layout.n_features} features"
            )
        return bayes

    # -- targets and gradients -----------------------------------------------------------------
    def _prepare_targets(self, y: Sequence[Any], learn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        targets = np.full(len(learn), -1, dtype=np.intp)
        rows = np.flatnonzero(learn)
        homogeneous = (
            isinstance(y, np.ndarray) or len({type(v) for v in y}) == 1
        )  # np.asarray([True, 1]) -> ints
        labels = np.asarray(y) if homogeneous else np.empty(0)
        if (
            labels.ndim == 1
            and labels.size > 16
            and labels.dtype.kind in "biufU"
            and rows.size == labels.size
        ):
            # vectorised: look up each distinct label once
            distinct, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
            order = np.argsort(first, kind="stable")
            values, first_rows = distinct[order].tolist(), first[order]
            codes = np.empty(len(values), dtype=np.intp)
            events = []
            incoming = 0
            for position, (label, row) in enumerate(zip(values, first_rows.tolist())):
                k = self._class_index.get(_check_label(label))
                if k is None:
                    k = len(self._classes) + incoming
                    incoming += 1
                    self._incoming[k] = label
                    events.append(row)
                codes[order[position]] = k
            return codes[inverse.reshape(-1)], np.array(events, dtype=np.intp)
        events = []
        incoming_keys: dict[Any, int] = {}
        for i in rows.tolist():
            label = _check_label(y[i])
            key = label
            k = self._class_index.get(key)
            if k is None:
                k = incoming_keys.get(key)
                if k is None:
                    k = incoming_keys[key] = len(self._classes) + len(incoming_keys)
                    self._incoming[k] = label
                    events.append(i)
            targets[i] = k
        return targets, np.array(events, dtype=np.intp)

    def _prepare_target_one(self, y: Any) -> int:
        label = _check_label(y)
        k = self._class_index.get(label)
        if k is None:
            k = len(self._classes)
            self._incoming[k] = label
        return k

    def _register_target(self, target: Any) -> None:
        k = int(target)
        if k < len(self._classes):
            return
        label = self._incoming.pop(k)
        self._class_index[label] = k
        self._classes.append(label)
        if len(self._classes) >= 2:
            self._new_tree()

    def _gradients(self, raw: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = softmax_with_reference(raw)[1:]
        y = targets[None, :] == np.arange(1, raw.shape[0] + 1)[:, None]
        return p - y, p * (1.0 - p)

    def _gradients_one(self, raw: list[float], target: Any) -> tuple[list[float], list[float]]:
        p = softmax_one(raw)[1:]
        g = [pk - (1.0 if k + 1 == target else 0.0) for k, pk in enumerate(p)]
        return g, [pk * (1.0 - pk) for pk in p]

    # -- prediction ----------------------------------------------------------------------------
    def _n_outputs(self) -> int:
        return len(self._classes)

    def _proba_rows(self, raw: np.ndarray, classes_at: np.ndarray) -> np.ndarray:
        """Probabilities [rows, classes] from raw scores; rows predicted with fewer classes are padded."""
        return softmax_rows(raw, classes_at, len(self._classes))

    def _proba_one(
        self, nodes: list[int], raw: list[float], codes: Sequence[int] | np.ndarray
    ) -> list[float]:
        """Probabilities of a record at `nodes` with `codes` (two classes or more), as `proba` asks."""
        tree = softmax_one(raw) if self._calibrator is None else self._calibrator.proba_one(raw)
        if self._bayes is not None:
            row = [int(c) for c in codes]
            return self._bayes.predict_one(row, tree, self._numeric_list(len(row)))
        if self._smoother is None:
            return tree
        self._smoother.sync(self._trees, len(self._classes))
        if self.proba == "hgs":
            return self._smoother.predict_one(nodes, None).smoothed
        return self._smoother.predict_one(nodes, tree).blended

    def predict_proba_one(self, x: Any) -> dict[Any, float]:
        """P(class | x) for every class seen so far ({} before the first label)."""
        if len(self._classes) < 2:
            return {c: 1.0 for c in self._classes}
        if self._smoother is None and self._bayes is None and self._leaf_bayes is None:
            # the trees' softmax, maybe calibrated (an ensemble overrides _predict_raw_one)
            raw = self._predict_raw_one(x)
            proba = softmax_one(raw) if self._calibrator is None else self._calibrator.proba_one(raw)
            return dict(zip(self._classes, proba))
        codes, nodes, raw = self._scored_one(x)
        proba = self._proba_one(nodes, raw, codes)
        if self._leaf_bayes is not None and self._at_leaves(nodes):
            k = len(self._classes)
            estimate = self._leaf_bayes.predict(tuple(nodes), codes, self._layout.numeric_list, k)
            proba = LeafBayes.served(proba, estimate)
        return dict(zip(self._classes, proba))

    def explain_one(self, x: Any) -> dict[Any, Explanation]:
        """Each class's logit against the first class (whose logit is 0), before calibration or
        smoothing, as a base value plus each feature's contribution (sgt.explain); by class label,
        the classes from the second on ({} before two classes are known)."""
        return dict(zip(self._classes[1:], explanations(self, x)))

    def predict_one(self, x: Any) -> Any:
        """The most probable class (the earliest seen on ties); None before the first label."""
        if len(self._classes) < 2:
            return self._classes[0] if self._classes else None
        if (
            self._smoother is not None
            or self._bayes is not None
            or self._calibrator is not None
            or self._leaf_bayes is not None
        ):
            p = list(self.predict_proba_one(x).values())
            return self._classes[p.index(max(p))]
        z = [0.0, *self._predict_raw_one(x)]
        return self._classes[z.index(max(z))]

    # -- the smoothing's and the naive Bayes' view of a run (see the hooks in BaseSGT) -----------
    def _numeric(self, codes: np.ndarray) -> np.ndarray:
        """The numeric features among the columns of `codes` (the naive Bayes uses these)."""
        return self._layout.numeric_within(codes.shape[1])

    def _numeric_list(self, width: int) -> list[int]:
        """`_numeric` for one record of `width` codes, as a list."""
        return [j for j in self._layout.numeric_list if j < width]

    def _apply_regrids(self, regrids: Sequence[Regrid]) -> None:
        super()._apply_regrids(regrids)
        if self._leaf_bayes is not None and regrids:
            features = [regrid.feature for regrid in regrids]
            if self._leaf_log is not None:
                self._leaf_log.regridded(features)
            else:
                self._leaf_bayes.regrid(features)
        # a batch's estimate has regridded already
        if self._bayes is not None and self._mixing is None and self._calibrating is None:
            for regrid in regrids:
                self._bayes.regrid(regrid)

    def _observe_learn(
        self, nodes: list[int], raw: list[float], target: Any, codes: Sequence[int] | np.ndarray
    ) -> None:
        if self._leaf_bayes is not None:
            self._leaf_learn(nodes, raw, int(target), codes)
        if self._calibrator is not None:
            if self._calibrating is not None:  # a batch calibrates every row at its end (_run_codes)
                self._calibrating.learned[self._calibrating.row] = list(raw)
                return
            if self._bayes is not None:  # with the calibrated softmax as it learns the record
                self._learn_young(raw, int(target), codes)
            self._calibrator.learn_one(raw, int(target))
            return
        if self._bayes is not None:
            softmax = softmax_one(raw) if self._trees else [1.0] * len(self._classes)
            if self._mixing is not None:  # a batch: the naive Bayes has estimated it already
                self._mixing.learned(softmax[int(target)])
            else:
                row = [int(c) for c in codes]
                self._bayes.learn_one(row, softmax, int(target), self._numeric_list(len(row)))
        if self._smoother is None:
            return
        self._smoother.sync(self._trees, len(self._classes))
        tree = softmax_one(raw) if self._trees and self.proba == "blend" else None
        self._smoother.learn_one(nodes, tree, int(target))

    def _forget_split_leaves(self) -> None:
        """The leaves' naive Bayes forgets the cells of leaves that have split, if a tree has split or
        been added since it last did (its prune walks every cell; no cell dies otherwise)."""
        assert self._leaf_bayes is not None
        shape = (len(self._trees), sum(tree.n_splits for tree in self._trees))
        if shape != self._leaf_splits:
            self._leaf_splits = shape
            self._leaf_bayes.prune(self._trees)

    def _at_leaves(self, nodes: Sequence[int]) -> bool:
        """Whether a record's route ended at a leaf of every tree, not at a branch that has not seen one
        of its categories: the leaves' naive Bayes serves only the first (a branch's cell is gone, or
        goes once the model notices the split)."""
        return all(tree.feature[node] < 0 for tree, node in zip(self._trees, nodes))

    def _leaf_learn(
        self, nodes: list[int], raw: list[float], target: int, codes: Sequence[int] | np.ndarray
    ) -> None:
        """The leaves' naive Bayes learns a record (a batch logs it, to replay once its trees ran)."""
        assert self._leaf_bayes is not None
        k = len(self._classes)
        if self._leaf_log is not None:
            self._leaf_log.learned(nodes, codes, target, raw, k)
            return
        self._forget_split_leaves()  # (memory only: no record reaches a split leaf again)
        row = codes if type(codes) is list else [int(c) for c in codes]
        self._leaf_bayes.learn(tuple(nodes), row, self._layout.numeric_list, target, trees_label(raw), k)

    def _learn_young(self, raw: list[float], target: int, codes: Sequence[int] | np.ndarray) -> None:
        """The young naive Bayes learns a record (the calibration not yet); it retires if it is time."""
        assert self._bayes is not None and self._calibrator is not None and self._retirement is not None
        calibrated = self._calibrator.proba_one(raw) if raw else [1.0] * len(self._classes)
        row = [int(c) for c in codes]
        self._bayes.learn_one(row, calibrated, target, self._numeric_list(len(row)))
        bayes = self._bayes
        if self._retirement.retires(bayes.log_ratio, self._n_seen + 1, bayes.lead):  # this record counted
            self._bayes = None

    def _observe_event(self, row: int) -> None:
        if self._calibrating is not None:
            self._calibrating.row = row
        if self._leaf_log is not None:
            self._leaf_log.event_row = row

    def _leafwise(self) -> bool:
        # the calibration's and its young naive Bayes's batches need only the event rows' scores, the
        # leaves' naive Bayes each row's leaf (`_observe_nodewise`)
        quiet = self._bayes is None or self._calibrator is not None
        watched = self._leaf_bayes is None or self._leaf_log is not None
        return super()._leafwise() and self._smoother is None and watched and quiet

    def _watches_nodewise(self) -> bool:
        return self._leaf_log is not None

    def _observe_nodewise(
        self,
        start: int,
        stop: int,
        watched: Watched,
        raw: np.ndarray,
        targets: np.ndarray,
        learn: np.ndarray,
        codes: np.ndarray,
    ) -> None:
        assert self._leaf_log is not None
        rows = slice(start, stop)
        at_leaves = watched.at_leaves[rows]
        # (a learned row stopped at a branch was learned on the one-record path: its hooks logged it)
        classes = np.where(learn[rows] & at_leaves, targets[rows], -1)
        nodes, k = watched.nodes[rows], len(self._classes)
        self._leaf_log.nodewise(start, nodes, raw[rows, :1].T, codes[rows], classes, k, at_leaves)

    def _folds_fills(self) -> bool:
        return self._smoother is None  # the smoothing's hooks are then silent

    def _observe_row(
        self, out: Any, row: int, nodes: list[int], raw: list[float], codes: Sequence[int] | np.ndarray
    ) -> None:
        if self._leaf_log is not None:  # (before the row is learned: the trees as they predicted it)
            self._leaf_log.predicted(nodes, codes, len(self._classes), self._at_leaves(nodes))
        if isinstance(out, _Mixing):
            out.row = row  # learned next, if labelled
            return
        if out is None:
            return
        k = len(self._classes)
        out.put(row, np.array(self._proba_one(nodes, raw, codes) if k >= 2 else [1.0] * k))

    def _observe_plain(
        self,
        out: Any,
        start: int,
        end: int,
        nodes: list[np.ndarray],
        raw: np.ndarray | None,
        targets: np.ndarray,
        learn: np.ndarray,
        codes: np.ndarray,
    ) -> None:
        if self._leaf_log is not None:
            rows = np.where(learn[start:end], targets[start:end], -1)
            # (before the block is learned: a node that has split is where a row's route stopped)
            at_leaves = np.ones(end - start, dtype=bool)
            for grown, at in zip(self._trees, nodes, strict=True):
                at_leaves &= grown.feature[at] < 0
            self._leaf_log.block(nodes, raw, codes, rows, len(self._classes), at_leaves)
        if self._bayes is not None:  # the batch mixes every row at its end (_run_codes)
            return
        if self._smoother is None:
            return
        self._smoother.sync(self._trees, len(self._classes))
        blend = self.proba == "blend"
        tree = softmax_with_reference(raw).T if raw is not None and blend else None
        rows = np.where(learn[start:end], targets[start:end], -1)
        proba = self._smoother.run(nodes, tree, rows)
        k = len(self._classes)
        if out is not None:
            chosen = (proba.blended if blend else proba.smoothed) if k >= 2 else np.ones((end - start, k))
            out.put(slice(start, end), chosen)

    def _run_codes(
        self,
        codes: np.ndarray,
        targets: np.ndarray,
        learn: np.ndarray,
        target_events: np.ndarray,
        out: Any = None,
        regrids: dict[int, list[Regrid]] | None = None,
        inputs: LeafInputs | None = None,
        routes: list[tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """With ``proba="calibrated"``, the trees run, then the calibration takes every row in order
        (sgt.calibration). With ``proba="mixed"``, a chunked batch: the naive Bayes estimates every row
        in one pass, the trees run, then the mixture weighs both row by row (sgt.bayes). A few rows go
        one by one."""
        if self._calibrator is not None:
            return self._run_calibrated(codes, targets, learn, target_events, out, regrids, inputs, routes)
        if self._bayes is None or codes.shape[0] <= ROW_BY_ROW_MAX:
            return super()._run_codes(codes, targets, learn, target_events, out, regrids, inputs, routes)
        rows = np.where(learn, targets, -1)
        regrids = regrids or {}
        estimate = self._bayes.estimate(codes, rows, len(self._classes), regrids, self._numeric(codes))
        self._mixing = _Mixing(codes.shape[0])
        try:
            raw, outputs_at = super()._run_codes(
                codes, targets, learn, target_events, self._mixing, regrids, inputs, routes
            )
            tree_learned = self._mixing.tree_learned
        finally:
            self._mixing = None
        tree = self._proba_rows(raw, outputs_at)
        plain = np.isnan(tree_learned) & (rows >= 0)  # learned as predicted
        tree_learned[plain] = tree[plain, rows[plain]]
        proba = self._bayes.mix(estimate, tree, tree_learned, rows)
        if out is not None:
            out.put(slice(0, codes.shape[0]), proba)
        return raw, outputs_at

    def _run_calibrated(
        self,
        codes: np.ndarray,
        targets: np.ndarray,
        learn: np.ndarray,
        target_events: np.ndarray,
        out: Any,
        regrids: dict[int, list[Regrid]] | None,
        inputs: LeafInputs | None,
        routes: list[tuple[np.ndarray, np.ndarray]] | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """`_run_codes` with ``proba="calibrated"``: the trees' raw scores of the whole batch, then the
        calibration of every row (the rows learned on the one-record path with their scores then)."""
        assert self._calibrator is not None
        rows = np.where(learn, targets, -1)
        bayes, classes_before, seen_before = self._bayes, len(self._classes), self._n_seen
        if bayes is not None:
            estimate = bayes.estimate(codes, rows, classes_before, regrids or {}, self._numeric(codes))
        self._calibrating = _Calibrating()
        try:
            raw, outputs_at = super()._run_codes(
                codes, targets, learn, target_events, None, regrids, inputs, routes
            )
            learned = self._calibrating.learned
        finally:
            self._calibrating = None
        chosen = None if bayes is None else np.ones(codes.shape[0])
        proba = self._calibrator.run(raw, outputs_at, rows, learned, len(self._classes), chosen)
        if bayes is not None and chosen is not None:
            mixed = bayes.mix_until(estimate, proba, chosen, rows, self._retirement, seen_before)
            proba = mixed.proba
            if mixed.retired_at is not None:
                self._bayes = None
        if out is not None:
            out.put(slice(0, codes.shape[0]), proba)
        return raw, outputs_at

    def _run_proba(self, X: Any, y: Sequence[Any] | None) -> np.ndarray:
        """`_run`, returning probabilities [rows, classes] as `proba` asks (the leaves' naive Bayes served
        in where it leads)."""
        if self._leaf_bayes is None:
            return self._run_trees_proba(X, y)
        if self._leaf_log is not None:  # a part of a batch that a memory budget cuts: the batch replays
            return self._run_trees_proba(X, y)
        self._leaf_log = log = Log()
        try:
            proba = self._run_trees_proba(X, y)
        finally:
            self._leaf_log = None
        replay(self._leaf_bayes, log, self._layout.numeric_list, proba)
        self._forget_split_leaves()
        return proba

    def _run_trees_proba(self, X: Any, y: Sequence[Any] | None) -> np.ndarray:
        """`_run_proba` without the leaves' naive Bayes."""
        if self._smoother is None and self._bayes is None and self._calibrator is None:
            raw, classes_at = self._run(X, y)
            return self._proba_rows(raw, classes_at)
        out = _ProbaRows(len(X))
        if self._smoother is None:
            self._run(X, y, out)
            return out.padded(len(self._classes))
        # the chunked path's events stay on numpy (same arithmetic); a few rows go one by one on lists
        self._smoother.prefer_arrays = len(X) > ROW_BY_ROW_MAX
        try:
            self._run(X, y, out)
        finally:
            self._smoother.prefer_arrays = False
        return out.padded(len(self._classes))

    def predict_proba_many(self, X: Any) -> np.ndarray:
        """Probabilities [rows, classes], columns in `classes_` order."""
        return self._run_proba(X, None)

    def predict_many(self, X: Any) -> np.ndarray:
        """Most probable class of every row (an object array)."""
        return self._labels(self.predict_proba_many(X))

    def predict_learn_many(self, X: Any, y: Sequence[Any]) -> np.ndarray:
        """Predict each row with the model that learned all earlier rows, then learn it.

        Returns probabilities [rows, classes] in `classes_` order as they are after the call; a class
        first seen at row i has probability 0 in rows before i. Rows whose label is None are only
        predicted. The result, and the model, equal a loop of predict_proba_one and learn_one.
        """
        return self._run_proba(X, y)

    def learn_one(self, x: Any, y: Any) -> None:
        """Learn one record (x: dict or sequence of values; y: the label)."""
        if y is None:
            raise ValueError("y must be a label, not None")
        self._learn_one(x, y)

    def learn_many(self, X: Any, y: Sequence[Any]) -> None:
        """Learn rows in order; identical to a loop of learn_one (rows labelled None are skipped)."""
        self._run_proba(X, y)

    def _labels(self, proba: np.ndarray) -> np.ndarray:
        out = np.empty(proba.shape[0], dtype=object)
        if not self._classes:
            return out
        index = proba.argmax(axis=1)
        for i, k in enumerate(index.tolist()):
            out[i] = self._classes[k]
        return out

    # scikit-learn style aliases
    def partial_fit(self, X: Any, y: Sequence[Any]) -> SGTClassifier:
        self.learn_many(X, y)
        return self

    def predict(self, X: Any) -> np.ndarray:
        return self.predict_many(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        return self.predict_proba_many(X)


class _Mixing:
    """The trees' probability of each learned event row's class as the row is learned (NaN for the
    other rows, learned as predicted): `_observe_row` names the row, `_observe_learn` fills it in."""

    def __init__(self, n: int) -> None:
        self.tree_learned = np.full(n, np.nan)
        self.row = -1

    def learned(self, p: float) -> None:
        self.tree_learned[self.row] = p


class _Calibrating:
    """The raw scores of a batch's rows learned on the one-record path, by row, as they are learned:
    `_observe_event` names the row, `_observe_learn` records its scores."""

    def __init__(self) -> None:
        self.learned: dict[int, list[float]] = {}
        self.row = -1


class _ProbaRows:
    """The probabilities a run predicts, collected row by row (a class first seen mid-run widens it)."""

    def __init__(self, n: int) -> None:
        self.rows = np.zeros((n, 0))

    def put(self, rows: int | slice, proba: np.ndarray) -> None:
        k = proba.shape[-1]
        if k > self.rows.shape[1]:
            self.rows = self.padded(k)
        self.rows[rows, :k] = proba

    def padded(self, k: int) -> np.ndarray:
        if k == self.rows.shape[1]:
            return self.rows
        out = np.zeros((self.rows.shape[0], k))
        out[:, : self.rows.shape[1]] = self.rows
        return out


def _check_label(label: Any) -> Any:
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, float) and not math.isfinite(label):
        raise ValueError(f"a class label must be a finite JSON scalar, got {label!r}")
    if not isinstance(label, (str, int, float, bool)):
        raise ValueError(
            "a class label must be a JSON scalar (str, int, float, bool), "
            f"got {label!r} of type {type(label).__name__}"
        )
    return label
