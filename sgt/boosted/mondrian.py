"""`MondrianForest`: a bounded Mondrian forest of classification trees, a side model of the boosted
classifier.

A Mondrian tree (Lakshminarayanan, Roy and Teh 2014; the online forests of Mourtada, Gaiffas and
Scornet 2021) keeps each node's box, the smallest box holding its records. A record outside a node's
box extends it; the node splits above itself with a probability given by an exponential draw whose
rate is the box's extension summed over the features, against the time gap to its children (a leaf,
whose gap is infinite, splits whenever a record of another class extends it; a node whose records are
all of the record's class never does). The split's feature is drawn in proportion to its extension,
its threshold uniformly within the extension. Where no single split gains (a checkerboard, two moons,
image segments) such randomly placed splits, averaged over trees, learn what boosted stumps do not.

Bounded and unaggregated, as measured for the boosted classifier's side model: `TREES` trees of at
most `MAX_NODES` nodes each (a full tree splits no more; its leaves keep counting), preallocated, so
the model's memory is bounded from its first record; the prediction is the trees' mean of their
leaves' probabilities, each node's class counts smoothed towards its parent's probabilities, the
root's by a Dirichlet prior of 1/2 (`SMOOTHING`: a young leaf serves about its ancestors'
probabilities). No weighted aggregation over the path, as AMF's: it cost twice the time for the
same accuracy.

The trees learn a record's *codes* (sgt.features: the model's own feature space, with its canonical
feature order, missing values as code 0, nominal categories by first appearance), not its raw values:
a box's extension is then in bins, so a feature's scale does not decide how often it is split on (a
timestamp, whose raw range dwarfs every other feature's, would take nearly every split), and after the
grids' warm-up a value beyond its grid is clipped into the end bin. Its grids are fine (`BINS`), since
a tree never splits within a bin. Measured on the robustness suite's classification streams (three
seeds, medians, 10,000 records at most): codes of 1,024 bins against raw values, timestamp-binary 84.6%
against 52.4%, the checkerboard 97.3% against 97.1%, Bananas 70.0% against 70.2%, ImageSegments 94.0%
against 93.8%; irrelevant-binary, whose irrelevant features have the wider raw ranges, 69.1% against
72.1%. Codes of 64 bins lost the checkerboard (95.6%) and Bananas (64.8%). A grid grown by a learned record
is carried into the trees at that record (`_regrid`: boxes and thresholds mapped to the new codes,
two bins merged where a threshold fell between them, which then sends them left); the record is
predicted on the old grid and learned on the new, as the trees of sgt do.

Every random draw is splitmix64's of (seed, record, tree, draw), a counter-based generator kept in
no state but the records learned (sgt.boosted.bagging's), so a batch, the one-record loop and a
restore at any point give the same bytes. The walk of the rows is sgt.kernels.mondrian's, compiled
where sgt.kernels.ENABLED and run as Python otherwise (the same lines, so the same bits).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(0, 1, size=(3000, 2))
>>> y = ((np.floor(X[:, 0] * 4) + np.floor(X[:, 1] * 4)) % 2).astype(int)  # a checkerboard
>>> forest = MondrianForest(warm_up=100)
>>> proba = forest.predict_learn_many(X, y)
>>> predicted = np.array(forest.classes_)[proba.argmax(axis=1)]
>>> bool((predicted[2000:] == y[2000:]).mean() > 0.9), forest.n_nodes <= forest.trees * 2047
(True, True)
>>> MondrianForest.from_bytes(forest.to_bytes()).to_bytes() == forest.to_bytes()
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Final

import numpy as np

from sgt import kernels
from sgt.base import _check_int
from sgt.classifier import _check_label
from sgt.features import CODE_DTYPE, FeatureSpace, Regrid
from sgt.kernels.compiling import plain
from sgt.kernels.mondrian import mondrian_rows
from sgt.serialization import Saved, SerializationError, decode, encode, expect_shape, reading

__all__ = ["BINS", "MAX_NODES", "SMOOTHING", "TREES", "MondrianForest"]

#: trees of a forest: 16 against 8 and 12, five seeds of each, on the robustness suite's 20 classification
#: streams: at or above the best peer ensemble on 16.4 of them on average against 15.0 and 16.2, mean
#: accuracy higher on every seed (docs/decisions.md); fewer than 8 lost streams
TREES: Final = 16
#: nodes a tree holds at most (a split adds two: a full tree holds 2,047); 1,023 lost accuracy on
#: rbf-5, 4,095 cost time
MAX_NODES: Final = 2047
#: bins of each numeric feature's grid: a tree splits within a bin never, so it needs the grid fine (at
#: 64 bins the checkerboard lost 1.5 points and Bananas 5 against raw values; at 1,024 neither did)
BINS: Final = 1024
#: the weight of a node's parent's probabilities in its own, (counts + b p_parent) / (n + b), from the
#: root (its counts under a Dirichlet prior of 1/2) down the record's path to its leaf: a young leaf
#: (one record, or none where a split left it empty) serves nearly its ancestors' probabilities, not a
#: flat prior's, as the hierarchical priors of Mondrian forests do (Lakshminarayanan, Roy and Teh
#: 2014). In the boosted classifier, on the robustness suite's 20 classification streams over five
#: seeds: at or above the best peer ensemble on 17.6 of them on average instead of 16.4 with the
#: leaf's counts under the prior alone, log loss on ImageSegments 0.31 instead of 0.60; 0.5 lost
#: (16.0); the forest alone gives the same figures from 0.03 to 0.25 (docs/decisions.md)
SMOOTHING: Final = 0.1

#: the walk without the kernels: sgt.kernels.mondrian's, run as Python (its docstring says why both agree)
_PYTHON_ROWS = plain(mondrian_rows)


class MondrianForest:
    """A bounded Mondrian forest classifier (see the module's docstring): `trees` trees of at most
    `max_nodes` nodes each, learning the codes of its own feature space (`bins`, `warm_up`,
    `feature_names`, `nominal`, `max_categories` as sgt's classifiers), its splits drawn from `seed`.

    A tree's nodes are arrays [trees, max_nodes, ...]: `child` (left, right; -1: a leaf), `feature` and
    `threshold` (codes at or below it go left), `time` (the node's birth: its parent's split time),
    `count` and `counts` (its records, in all and per class), `lo` and `hi` (its box, in codes); `size`
    the nodes each tree uses (its root first, then the nodes in the order splits made them).
    """

    #: `SMOOTHING`, as a class attribute a benchmark's variant may override; not a setting: saved
    #: models do not carry it
    _smoothing: ClassVar[float] = SMOOTHING

    def __init__(
        self,
        trees: int = TREES,
        max_nodes: int = MAX_NODES,
        seed: int = 0,
        bins: int = BINS,
        warm_up: int = 1000,
        feature_names: Sequence[str] | None = None,
        nominal: Sequence[str] = (),
        max_categories: int | None = None,
    ) -> None:
        _check_int("trees", trees, low=1, allowed="an integer >= 1")
        _check_int("max_nodes", max_nodes, low=1, allowed="an integer >= 1")
        _check_int("seed", seed, low=0, allowed="an integer >= 0")
        self.trees = int(trees)
        self.max_nodes = int(max_nodes)
        self.seed = int(seed)
        self.bins = bins
        self.warm_up = warm_up
        self.feature_names = None if feature_names is None else list(feature_names)
        self.nominal = list(nominal)
        self.max_categories = max_categories
        self._space = FeatureSpace(bins, warm_up, nominal, feature_names, max_categories)
        self._classes: list[Any] = []
        self._class_index: dict[Any, int] = {}
        self._n_seen = 0
        shape = (self.trees, self.max_nodes)
        self._child = np.full((*shape, 2), -1, dtype=np.int32)
        self._feature = np.zeros(shape, dtype=np.int32)
        self._threshold = np.zeros(shape, dtype=np.int32)
        self._time = np.zeros(shape)
        self._count = np.zeros(shape, dtype=np.int32)
        self._counts = np.zeros((*shape, 0), dtype=np.int32)
        self._lo = np.zeros((*shape, 0), dtype=CODE_DTYPE)
        self._hi = np.zeros((*shape, 0), dtype=CODE_DTYPE)
        self._size = np.ones(self.trees, dtype=np.int64)

    # -- introspection ---------------------------------------------------------------------------
    @property
    def classes_(self) -> list[Any]:
        return list(self._classes)

    @property
    def n_seen(self) -> int:
        """Records learned."""
        return self._n_seen

    @property
    def n_nodes(self) -> int:
        """Nodes over every tree (a tree that has learned no record counts its empty root)."""
        return int(self._size.sum())

    @property
    def nbytes(self) -> int:
        """Bytes of the node arrays (preallocated to the bound: they grow only with the features and
        classes known)."""
        return sum(a.nbytes for a in self._arrays().values())

    def _arrays(self) -> dict[str, np.ndarray]:
        return {
            "child": self._child,
            "feature": self._feature,
            "threshold": self._threshold,
            "time": self._time,
            "count": self._count,
            "counts": self._counts,
            "lo": self._lo,
            "hi": self._hi,
            "size": self._size,
        }

    # -- learning and prediction -----------------------------------------------------------------
    def predict_learn_many(self, X: Any, y: Sequence[Any] | None) -> np.ndarray:
        """Each row's probabilities [rows, classes known after the batch] (in `classes_` order; a class
        not yet known when the row was predicted: 0) before the row is learned, then the row learned
        (`y[i]` None, or `y` None: only predicted). Strictly prequential and exact: any batching gives
        these numbers and the same model."""
        return self._run(X, y, predict=True)

    def learn_many(self, X: Any, y: Sequence[Any]) -> None:
        self._run(X, y, predict=False)

    def predict_proba_many(self, X: Any) -> np.ndarray:
        return self._run(X, None, predict=True)

    def learn_one(self, x: Any, y: Any) -> None:
        if y is None:
            raise ValueError("y must be a label, not None")
        self._run([x], [y], predict=False)

    def predict_proba_one(self, x: Any) -> dict[Any, float]:
        """The probability of each class known (empty before the first record)."""
        codes = np.array([self._space.encode_one(x, learn=False)], dtype=CODE_DTYPE)
        k = len(self._classes)
        out = np.zeros((1, k))
        self._rows(codes, np.full(1, -1, dtype=np.int64), np.ones(1, dtype=bool), np.full(1, k), out)
        return dict(zip(self._classes, out[0].tolist()))

    def predict_one(self, x: Any) -> Any:
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.__getitem__) if proba else None  # (the first on ties)

    def _run(self, X: Any, y: Sequence[Any] | None, predict: bool) -> np.ndarray:
        """Encode the rows, register their classes (nothing changes if any is bad), then predict and
        learn them in order, a grown grid's record as an event (`_run_codes`)."""
        n = len(X)
        labels: Sequence[Any] = [None] * n if y is None else y
        if len(labels) != n:
            raise ValueError(f"X has {n} rows but y has {len(labels)} targets")
        learn = np.array([t is not None for t in labels], dtype=bool)
        snapshot = self._space.snapshot()
        try:
            checked = [None if t is None else _check_label(t) for t in labels]
            codes = self._encode(X, learn)
        except Exception:
            self._space.restore(snapshot)  # a bad record anywhere in the batch changes nothing
            raise
        known = np.empty(n, dtype=np.int64)  # the classes known as each row is predicted
        targets = np.full(n, -1, dtype=np.int64)
        for i, label in enumerate(checked):
            known[i] = len(self._classes)
            if label is not None:
                targets[i] = self._class_index.setdefault(label, len(self._classes))
                if targets[i] == len(self._classes):
                    self._classes.append(label)
        self._widen(codes.shape[1], len(self._classes))
        out = np.zeros((n, len(self._classes) if predict else 0))
        regrids: dict[int, list[Regrid]] = {}
        for regrid in self._space.take_regrids():
            regrids.setdefault(regrid.row, []).append(regrid)
        self._run_codes(codes, targets, np.full(n, predict) & (known > 0), known, out, regrids)
        return out

    def _encode(self, X: Any, learn: np.ndarray) -> np.ndarray:
        """The rows' codes on the model's feature space (registering what learned rows bring)."""
        if isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind in "fiub":
            codes = self._space.encode_array(X, learn)
        elif isinstance(X, np.ndarray) and X.ndim != 2:
            raise ValueError(f"X must be 2-D, got an array of shape {X.shape}")
        else:
            rows = list(X)
            if len(rows) == 1 and learn[0]:
                # one learned record as sgt's models' `learn_one` encodes it: the same codes as a batch's
                # row, without the batch encoder's passes per column
                codes = np.array([self._space.encode_one(rows[0], learn=True)])
            else:
                codes = self._space.encode_rows(rows, learn)
        return np.ascontiguousarray(codes, dtype=CODE_DTYPE)

    def _run_codes(
        self,
        codes: np.ndarray,
        targets: np.ndarray,
        predict: np.ndarray,
        known: np.ndarray,
        out: np.ndarray,
        regrids: dict[int, list[Regrid]],
    ) -> None:
        """The rows between grown grids in one walk each; a grown grid's row predicted on the old grid
        (its regridded features at their codes before), the grids carried into the trees, then the row
        learned on the new grid."""
        start = 0
        for row in sorted(regrids):
            part = slice(start, row)
            self._rows(codes[part], targets[part], predict[part], known[part], out[part])
            before = codes[row : row + 1].copy()
            for regrid in reversed(regrids[row]):  # (the first grid of a feature is the one predicted on)
                before[0, regrid.feature] = regrid.code_before
            none = np.full(1, -1, dtype=np.int64)
            self._rows(before, none, predict[row : row + 1], known[row : row + 1], out[row : row + 1])
            for regrid in sorted(regrids[row], key=lambda r: r.feature):
                self._regrid(regrid)
            self._rows(
                codes[row : row + 1], targets[row : row + 1], np.zeros(1, dtype=bool), known[:1], out[:1]
            )
            start = row + 1
        part = slice(start, None)
        self._rows(codes[part], targets[part], predict[part], known[part], out[part])

    def _rows(
        self, codes: np.ndarray, targets: np.ndarray, predict: np.ndarray, known: np.ndarray, out: np.ndarray
    ) -> None:
        """The walk of `codes`' rows (sgt.kernels.mondrian.mondrian_rows, compiled, or its Python form
        without the kernels: the same bits); the records learned move on."""
        if not codes.shape[0]:
            return
        if not (predict.any() or (targets >= 0).any()):
            return  # nothing to predict nor to learn
        walk = mondrian_rows if kernels.ENABLED else _PYTHON_ROWS
        with np.errstate(over="ignore"):  # (as Python, numpy's uint64 scalars warn where splitmix64 wraps)
            walk(
                self._child,
                self._feature,
                self._threshold,
                self._time,
                self._count,
                self._counts,
                self._lo,
                self._hi,
                self._size,
                codes,
                targets,
                predict,
                known,
                np.uint64(self.seed),
                np.uint64(self._n_seen),
                self.max_nodes,
                out,
                self._smoothing,
            )
        self._n_seen += int((targets >= 0).sum())

    def _widen(self, features: int, classes: int) -> None:
        """Columns for features and classes new to the trees: a box's new feature is at code 0 (its
        records were missing it), a node's new class count 0."""
        if features > self._lo.shape[2]:
            extra = ((0, 0), (0, 0), (0, features - self._lo.shape[2]))
            self._lo = np.pad(self._lo, extra)
            self._hi = np.pad(self._hi, extra)
        if classes > self._counts.shape[2]:
            self._counts = np.pad(self._counts, ((0, 0), (0, 0), (0, classes - self._counts.shape[2])))

    def _regrid(self, regrid: Regrid) -> None:
        """The trees carried to a feature's grown grid: boxes and thresholds mapped to its new codes (a
        threshold between two bins that merge then sends both left)."""
        mapping = regrid.mapping.astype(np.int64)
        j = regrid.feature
        self._lo[:, :, j] = mapping[self._lo[:, :, j]]
        self._hi[:, :, j] = mapping[self._hi[:, :, j]]
        tests = (self._feature == j) & (self._child[:, :, 0] >= 0)
        self._threshold[tests] = mapping[self._threshold[tests]]

    # -- saving ------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The model in sgt's format (sgt.serialization): its settings, classes, feature space, and
        the nodes each tree uses (a restore preallocates the rest)."""
        return encode(*self._saved_parts())

    def _saved_parts(self) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
        space, ranges = self._space.saved()
        header = {
            "model": type(self).__name__,
            "params": self.get_params(),
            "n_seen": self._n_seen,
            "classes": list(self._classes),
            "space": space,
        }
        used = int(self._size.max())
        arrays = [ranges, ("size", self._size)]
        arrays += [(name, a[:, :used]) for name, a in self._arrays().items() if name != "size"]
        return header, arrays

    def get_params(self) -> dict[str, Any]:
        return {
            "trees": self.trees,
            "max_nodes": self.max_nodes,
            "seed": self.seed,
            "bins": self.bins,
            "warm_up": self.warm_up,
            "feature_names": self.feature_names,
            "nominal": self.nominal,
            "max_categories": self.max_categories,
        }

    @classmethod
    def from_bytes(cls, blob: bytes) -> MondrianForest:
        """The model `to_bytes` wrote (SerializationError for anything else)."""
        saved = decode(blob)
        if saved.header.get("model") != cls.__name__:
            raise SerializationError(f"the data holds a {saved.header.get('model')}, not a {cls.__name__}")
        return cls.from_saved(saved)

    @classmethod
    def from_saved(cls, saved: Saved) -> MondrianForest:
        with reading():
            header, arrays = saved.header, saved.arrays
            model = cls(**header["params"])
            model._space.load_saved(header["space"], arrays["space.ranges"], saved.version)
            model._classes = [_check_label(c) for c in header["classes"]]
            model._class_index = {label: k for k, label in enumerate(model._classes)}
            if len(model._class_index) != len(model._classes):
                raise SerializationError("a MondrianForest's classes repeat")
            model._n_seen = int(header["n_seen"])
            model._restore_nodes(arrays, len(model._space.names), len(model._classes))
            return model

    def _restore_nodes(self, arrays: dict[str, np.ndarray], features: int, classes: int) -> None:
        """The node arrays from a save (checked: shapes, the sizes within the bound, children and
        features within the nodes and features used)."""
        trees, bound = self.trees, self.max_nodes
        size = expect_shape("size", arrays["size"], (trees,)).astype(np.int64)
        used = int(size.max())
        if size.min() < 1 or used > bound:
            raise SerializationError(f"a MondrianForest's tree sizes {size.tolist()} exceed {bound} nodes")
        shapes = {
            "child": (trees, used, 2),
            "feature": (trees, used),
            "threshold": (trees, used),
            "time": (trees, used),
            "count": (trees, used),
            "counts": (trees, used, classes),
            "lo": (trees, used, features),
            "hi": (trees, used, features),
        }
        self._widen(features, classes)
        for name, shape in shapes.items():
            full = getattr(self, f"_{name}")
            full[:, :used] = expect_shape(name, arrays[name], shape)
        if (self._child[:, :, 0] >= size[:, None]).any() or (self._child[:, :, 1] >= size[:, None]).any():
            raise SerializationError("a MondrianForest's child is beyond its tree")
        if ((self._feature < 0) | (self._feature >= max(features, 1))).any():
            raise SerializationError("a MondrianForest's node tests a feature it does not know")
        self._size = size
