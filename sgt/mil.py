"""MILClassifier: multi-instance learning with a Stochastic Gradient Tree (paper section 4.3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from sgt.base import BaseSGT, _check_int
from sgt.softmax import softmax_one

__all__ = ["MILClassifier"]


class MILClassifier(BaseSGT):
    """Binary multi-instance classifier: a bag is positive when one of its instances is.

    A bag is a list of records (dicts or sequences). One tree scores instances; the bag's
    probability is sigmoid(max over its instances of f(x)) (Eq. 26). Learning a bag with label
    y in {0, 1} computes the cross-entropy gradient at the top-scoring instance (Eqs. 28-29) and
    gives it to that instance only. The other instances have zero gradient and Hessian; unlike the
    authors' Weka code we do not add them as (0, 0) pairs, which would dilute the leaf means and
    act as a larger lambda (Eq. 13 with sums is unchanged by zeros; its mean form is not).

    `learn_one(bag, y)` learns a stream of bags; `fit(bags, y, epochs)` is the paper's batch
    setting: ranges are fixed from all instances first, then several passes are made.

    Examples
    --------
    >>> import numpy as np
    >>> from sgt import MILClassifier
    >>> rng = np.random.default_rng(3)
    >>> bags = [rng.uniform(0, 1, size=(5, 2)) for _ in range(400)]
    >>> labels = [int((bag[:, 0] > 0.9).any()) for bag in bags]
    >>> model = MILClassifier(grace_period=50).fit(bags, labels, epochs=10)
    >>> hits = [model.predict_one(b) == t for b, t in zip(bags, labels)]
    >>> bool(np.mean(hits) > 0.9)
    True
    """

    #: a bag learns through its top-scoring instance alone: adaptive leaves are not measured there
    _leaf_models: ClassVar[tuple[str, ...]] = ("constant", "linear")

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
        max_bytes: int | None = None,
    ) -> None:
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
        self._new_tree()

    @property
    def classes_(self) -> list[int]:
        return [0, 1]

    @staticmethod
    def _instances(bag: Any) -> Sequence[Any] | np.ndarray:
        """The bag's records (ValueError for anything that is not a non-empty list of them)."""
        if isinstance(bag, np.ndarray) and bag.ndim == 2:
            bag = list(bag)
        if (
            isinstance(bag, (str, bytes, dict))
            or not isinstance(bag, (Sequence, np.ndarray))
            or len(bag) == 0
        ):
            raise ValueError("a bag must be a non-empty list of records")
        return bag

    def _bag_codes(self, bag: Any, learn: bool) -> list[list[int]]:
        bag = self._instances(bag)
        snapshot = self._space.snapshot() if learn else None
        try:
            codes = [self._space.encode_one(x, learn=learn) for x in bag]
        except Exception:
            if snapshot is not None:  # a bad instance anywhere in the bag: the earlier ones register nothing
                self._space.restore(snapshot)
            raise
        if learn:  # the bag's values may have grown grids: code every instance on the grids it left
            self._sync_layout()
            self._apply_regrids(self._space.take_regrids())
            codes = [self._space.encode_one(x, learn=False) for x in bag]
        width = len(self._space)  # features registered by later instances are missing in earlier ones
        return [c + [0] * (width - len(c)) for c in codes]

    def _bag_probability(self, codes: list[list[int]]) -> tuple[float, int]:
        tree = self._trees[0]
        raws = [tree.predict_one(tree.route_one(c)[0], c) for c in codes]
        top = int(np.argmax(raws))
        return softmax_one([float(raws[top])])[1], top

    def learn_one(self, bag: Any, y: Any) -> None:
        """Learn one bag with label y (0/1 or False/True)."""
        label = _bag_label(y)
        codes = self._bag_codes(bag, learn=True)
        self._sync_layout()
        p, top = self._bag_probability(codes)
        tree = self._trees[0]
        node, stopped = tree.route_one(codes[top])
        if stopped:
            node = tree.add_category_child(node, int(codes[top][tree.feature[node]]))
        tree.learn_one(node, codes[top], p - label, p * (1.0 - p), self._space)
        self._n_seen += 1

    def fit(
        self, bags: Sequence[Any], y: Sequence[Any], epochs: int = 20, seed: int | None = None
    ) -> MILClassifier:
        """Batch training: fix the ranges from every instance, then `epochs` passes over the bags.

        With `seed`, each pass visits the bags in a fresh random order; otherwise in the given order.
        """
        _check_int("epochs", epochs, low=1, allowed="an integer >= 1")
        if len(bags) != len(y):
            raise ValueError(f"{len(bags)} bags but {len(y)} labels")
        labels = [_bag_label(t) for t in y]
        for bag in bags:
            self._bag_codes(bag, learn=True)
        self._space.freeze_ranges()
        self._sync_layout()
        rng = np.random.default_rng(seed) if seed is not None else None
        for _ in range(epochs):
            order = rng.permutation(len(bags)) if rng is not None else range(len(bags))
            for i in order:
                self.learn_one(bags[i], labels[i])
        return self

    def predict_proba_one(self, bag: Any) -> dict[int, float]:
        """{0: P(negative bag), 1: P(positive bag)}."""
        p, _ = self._bag_probability(self._bag_codes(bag, learn=False))
        return {0: 1.0 - p, 1: p}

    def predict_one(self, bag: Any) -> int:
        return int(self.predict_proba_one(bag)[1] > 0.5)

    def predict_proba_many(self, bags: Sequence[Any]) -> np.ndarray:
        """Probabilities [bags, 2] (columns: negative, positive)."""
        return np.array([list(self.predict_proba_one(b).values()) for b in bags]).reshape(len(bags), 2)

    def predict_many(self, bags: Sequence[Any]) -> np.ndarray:
        return (self.predict_proba_many(bags)[:, 1] > 0.5).astype(np.int64)

    def learn_many(self, bags: Sequence[Any], y: Sequence[Any]) -> None:
        """Learn bags in order (one pass). A bad bag or label anywhere refuses the whole batch before any
        bag is learned, as the other models' batches do."""
        if len(bags) != len(y):
            raise ValueError(f"{len(bags)} bags but {len(y)} labels")
        labels = [_bag_label(t) for t in y]
        snapshot = self._space.snapshot()
        try:  # every instance encoded in the feature space alone, as learning would, then the space as it was
            for bag in bags:
                for x in self._instances(bag):
                    self._space.encode_one(x, learn=True)
        finally:
            self._space.restore(snapshot)
        for bag, label in zip(bags, labels, strict=True):
            self.learn_one(bag, label)


def _bag_label(y: Any) -> int:
    if isinstance(y, np.generic):
        y = y.item()
    if y in (0, 1) and isinstance(y, (int, float, bool)):
        return int(y)
    raise ValueError(f"a bag label must be 0/1 or False/True, got {y!r}")
