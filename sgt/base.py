"""What every SGT estimator shares: parameters, feature encoding, persistence and the exact batch algorithm.

`BaseSGT` holds the hyperparameters (checked by sgt.checks), the feature space and its layout, the
trees, the one-record path (`_learn_codes`: register the target, route, predict, compute g and h,
learn each tree's leaf) and the hooks a concrete estimator fills in (its targets, its loss, what it
observes per row). The batch methods give the one-record path's bits: the chunked path between
events is sgt.chunked, the node-by-node path of one-tree models sgt.leafwise. A batch that would
widen the layout under a memory budget runs as parts cut where a loop widens it (`_widening_rows`).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from sgt.checks import check_int as _check_int
from sgt.checks import check_real as _check_real
from sgt.chunked import ROW_BY_ROW_MAX, run_codes, run_parts, widening_rows
from sgt.explain import importances
from sgt.features import CODE_DTYPE, MAX_CATEGORIES, FeatureName, FeatureSpace, Regrid
from sgt.layout import Layout, LeafInputs, Params, checked_bound_block
from sgt.leafwise import Watched
from sgt.multioutput import load_tree
from sgt.serialization import Saved, SerializationError, decode, encode, reading
from sgt.tree import Tree

__all__ = ["DEFAULTS", "PAPER_DEFAULTS", "ROW_BY_ROW_MAX", "BaseSGT"]

#: The paper's settings (section 5 of Gouk et al.; the authors' code): `SGTClassifier(**PAPER_DEFAULTS)`.
PAPER_DEFAULTS = {
    "delta": 1e-7,
    "grace_period": 200,
    "lambda_": 0.1,
    "gamma": 1.0,
    "bins": 64,
    "warm_up": 1000,
    "grace_start": 200,
    "leaf_model": "constant",
}

#: Our defaults. delta, grace_period and gamma differ from the paper's, grace_start = 10 (a root's
#: first attempt after 10 records, a new leaf's after 10 * 2^depth) replaces the paper's warm-up,
#: which blocked numeric splits for 1,000 values (grids grow with the data), and leaf_model =
#: "linear" (not in the paper) adds a linear term to each leaf; the regressors' leaf_model is
#: "adaptive". Why, measured: docs/decisions.md ("The single tree") and BENCHMARKS.md, section 3.
DEFAULTS = {
    "delta": 1e-3,
    "grace_period": 100,
    "lambda_": 0.1,
    "gamma": 0.1,
    "bins": 64,
    "warm_up": 1000,
    "grace_start": 10,
    "leaf_model": "linear",
    "linear_lambda": 0.01,
}


#: What a leaf predicts with: its value ("constant", the paper's), its value plus a linear term in
#: the numeric features ("linear", see sgt.tree.Tree.predict_rows), fitted from the same g and h, or
#: either, each leaf by which predicted its records better so far ("adaptive", see sgt.tree.Tree._choose;
#: one-output trees only: not the boosted classifier, whose members may have several outputs).
LEAF_MODELS = ("constant", "linear", "adaptive")


class TreeGroup(NamedTuple):
    """Trees the views (sgt.export) show together: a member of an ensemble, or a whole model."""

    name: str  # "member 3", or "" for the trees of a single model
    trees: list[Tree]


class EncodedRows(NamedTuple):
    """A batch as `BaseSGT._encoded_rows` makes it ready to run: its codes, which rows are learned,
    the checked targets, the rows that bring a new target (`_prepare_targets`' events) and the grids
    that grew at each row (by row)."""

    codes: np.ndarray
    learn: np.ndarray
    targets: np.ndarray
    events: np.ndarray
    regrids: dict[int, list[Regrid]]


class LastRecord(NamedTuple):
    """The record a single model last scored to predict it, kept while the model has learned nothing
    since: a River-style loop predicts each record, then learns it, and learning takes the codes, the
    leaves and the raw scores the prediction found instead of encoding and routing it again
    (`BaseSGT._learn_one`; about 1.2 times the loop's records/s: docs/decisions.md). Kept for a dict
    whose routes stopped at no nominal branch; taken only where learning would encode it as
    predicting did, changing nothing (`FeatureSpace.settled`, checked when it is taken, so that a
    prediction alone pays for the two tuples of its names and values only)."""

    record: dict[Any, Any]  # the dict itself, matched by identity,
    # its names and values, by identity too: a dict changed in place is another record
    names: tuple[Any, ...]
    values: tuple[Any, ...]
    n_seen: int  # the records the model had learned, and its space's revision, when it scored it
    revision: int
    codes: list[int]
    nodes: list[int]
    raw: list[float]  # `_raw_one`'s scores

    def holds(self, x: Any, n_seen: int, revision: int) -> bool:
        """Whether `x` is this record, unchanged, and the model and its space are as they were."""
        if x is not self.record or (n_seen, revision) != (self.n_seen, self.revision):
            return False
        if len(x) != len(self.names):
            return False
        return all(map(operator.is_, x, self.names)) and all(map(operator.is_, x.values(), self.values))


class BaseSGT:
    """Base class of the SGT estimators; not used directly."""

    #: the leaf models the estimator takes (its trees' kind decides: see LEAF_MODELS)
    _leaf_models: ClassVar[tuple[str, ...]] = LEAF_MODELS
    #: a new model's blind split (Params.blind_after, blind_impurity), None: a leaf splits on gain only.
    #: A restored model takes what it was saved with (none if saved before the blind split existed)
    _blind: ClassVar[tuple[float, float] | None] = None
    #: a new model's `bound_block` (Params.bound_block; None: a leaf at the depth bound attempts every
    #: grace period). A restored model takes what it was saved with (none if saved without it)
    _bound_block: ClassVar[int | None] = None
    #: whether `_predict_raw_one` keeps the record it scored for `_learn_one` (`LastRecord`); an
    #: ensemble, which predicts and learns its own way, does not
    _keeps_last: ClassVar[bool] = True
    #: the record last scored, while it may be learned as it was predicted (`LastRecord`)
    _last: LastRecord | None = None

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
        nominal: Iterable[str] = (),
        max_categories: int | None = None,
        grace_start: int = 10,
        leaf_model: str = "linear",
        linear_lambda: float = 0.01,
        max_bytes: int | None = None,
    ) -> None:
        _check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True, allowed="in (0, 1)")
        if max_bytes is not None:
            _check_int("max_bytes", max_bytes, low=1, allowed="None (unbounded) or an integer >= 1 (bytes)")
        _check_int("grace_period", grace_period, low=1, allowed="an integer >= 1")
        _check_int("grace_start", grace_start, low=1, allowed="an integer >= 1")
        _check_real("linear_lambda", linear_lambda, low=0.0, low_open=True, allowed="> 0")
        if leaf_model not in self._leaf_models:
            raise ValueError(
                f"leaf_model must be one of {', '.join(map(repr, self._leaf_models))}, got {leaf_model!r}"
            )
        _check_real("lambda_", lambda_, low=0.0, allowed=">= 0")
        _check_real("gamma", gamma, low=0.0, allowed=">= 0")
        _check_int("bins", bins, low=2, high=4096, allowed="an integer in [2, 4096]")
        _check_int("warm_up", warm_up, low=1, allowed="an integer >= 1")
        if max_depth is not None:
            _check_int("max_depth", max_depth, low=0, allowed="None or an integer >= 0")
        if max_categories is not None:
            _check_int(
                "max_categories",
                max_categories,
                low=1,
                high=MAX_CATEGORIES - 1,
                allowed=f"None or an integer in [1, {MAX_CATEGORIES - 1}]",
            )
        if feature_names is not None and (
            isinstance(feature_names, str) or not all(isinstance(n, str) for n in feature_names)
        ):
            raise ValueError("feature_names must be None or a sequence of strings")
        if isinstance(nominal, str) or not all(isinstance(n, str) for n in nominal):
            raise ValueError("nominal must be an iterable of feature names (strings)")
        self.delta = float(delta)
        self.grace_period = int(grace_period)
        self.grace_start = int(grace_start)
        self.leaf_model = str(leaf_model)
        self.linear_lambda = float(linear_lambda)
        self.lambda_ = float(lambda_)
        self.gamma = float(gamma)
        self.bins = int(bins)
        self.warm_up = int(warm_up)
        self.max_depth = None if max_depth is None else int(max_depth)
        self.feature_names = None if feature_names is None else tuple(feature_names)
        self.nominal = tuple(sorted(set(nominal)))
        self.max_categories = None if max_categories is None else int(max_categories)
        self.max_bytes = None if max_bytes is None else int(max_bytes)
        self._space = FeatureSpace(
            self.bins, self.warm_up, self.nominal, self.feature_names, self.max_categories
        )
        self._layout = Layout(self._space)
        self._layout_revision = self._space.revision
        self._trees: list[Tree] = []
        self._n_seen = 0
        # how a grid's large growth carries linear terms (Params.drop_far_terms): a saved model restores
        # the rule it was saved with, False before the rule existed
        self._drop_far_terms = True
        self._blind_split = self._blind
        # Params.bound_block: how long the blocks of a leaf at the depth bound grow (None: to grace_period,
        # as before the setting; saved only when set). Not a constructor argument: the class's
        # `_bound_block`; an ensemble sets it on its members (`Member.set_tree_params`), which read it
        # here when they make a tree
        self.bound_block: int | None = self._bound_block

    # -- hooks for the concrete estimators ----------------------------------------------------
    def _prepare_targets(self, y: Sequence[Any], learn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Validate targets; return them as an array and the rows that are target events."""
        raise NotImplementedError

    def _register_target(self, target: Any) -> None:
        """Called for every learned record before it is routed (may add a tree)."""

    def _gradients(self, raw: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """g and h, shaped like `raw` ([trees, rows]), of the loss at raw scores `raw`."""
        raise NotImplementedError

    def _gradients_of_rows(
        self, raw: np.ndarray, targets: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """g and h [m] of a one-output model's raw scores `raw` [m] of rows `rows` of `targets`: its
        `_gradients` of the rows gathered (sgt.leafwise's pass; a boosted member computes them from the
        rows where they lie)."""
        g, h = self._gradients(raw[None], targets[rows])
        return g[0], h[0]

    def _base(self) -> float:
        return 0.0

    def _n_outputs(self) -> int:
        """What `_run` records per row beside the raw scores (the classifier: classes known then)."""
        return self._n_raw_scores()

    def _n_raw_scores(self) -> int:
        """Raw scores per record: one per output of each tree."""
        trees = self._trees
        if len(trees) == 1:  # (a boosted member's, on every pass of its runs: the sum's generator costs)
            return trees[0].n_outputs
        return sum(tree.n_outputs for tree in trees)

    def _tree_columns(self) -> list[int | slice]:
        """Each tree's rows of a model's raw scores and gradients ([outputs, rows], the trees' outputs
        in tree order): an index for a single-output tree, a slice for a multi-output tree's."""
        columns: list[int | slice] = []
        start = 0
        for tree in self._trees:
            k = tree.n_outputs
            columns.append(start if k == 1 else slice(start, start + k))
            start += k
        return columns

    # Hooks for state kept beside the trees, per record (the classifier's smoothing counts, its naive
    # Bayes). They see every record at the nodes it reaches, with its codes, in order, while the trees
    # and the grids are as it finds them.
    def _observe_learn(
        self, nodes: list[int], raw: list[float], target: Any, codes: Sequence[int] | np.ndarray
    ) -> None:
        """One record is about to be learned at `nodes` (one per tree), with raw scores `raw`."""

    def _observe_row(
        self, out: Any, row: int, nodes: list[int], raw: list[float], codes: Sequence[int] | np.ndarray
    ) -> None:
        """Row `row` of a `_run` is predicted at `nodes` on the one-record path (before it is learned,
        and before a grid that the row grows has grown: `codes` are the row's codes on the old grid)."""

    def _observe_event(self, row: int) -> None:
        """Row `row` of a `_run` is learned next on the one-record path (`_learn_codes`, whose
        `_observe_learn` sees it); the other learned rows are learned with the scores they were
        predicted with."""

    def _before_changes(self, row: int) -> None:
        """The trees may change next at row `row` of a `_run` (a split attempt acts, or a record is
        learned on the one-record path), and at no earlier row any more: changes come in row order."""

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
        """Rows [start, end) of a `_run` hold no event: predict them in order, then learn the labelled
        ones (`nodes[t]`: each row's node in tree t; `raw`: [trees, rows], None without trees; `codes`:
        the rows' codes)."""

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
        """Rows [start, stop) of a `_run` were taken node by node (sgt.leafwise; one tree, no new target,
        no grown grid), each predicted at `watched.nodes[row]` with raw scores `raw[row]`; the learned
        ones at a leaf were learned with them, and those stopped at a nominal branch on the one-record
        path (`_observe_event`, `_observe_learn`: those hooks saw them during the run, out of row
        order). Called when `_watches_nodewise`."""

    def _watches_nodewise(self) -> bool:
        """Whether the hooks follow a node-by-node run's rows through `_observe_nodewise`."""
        return False

    def _leafwise(self) -> bool:
        """Whether a run may take its rows node by node (sgt.leafwise): with one tree, whose
        gradients then depend on its own output only, and hooks that need not see the rows in order
        (an estimator whose hooks watch them says no)."""
        return len(self._trees) == 1

    def _folds_fills(self) -> bool:
        """Whether a record that only fills leaves may be run as the last of the plain rows before it
        (the hooks then see it as a plain row, not through `_observe_row` and `_observe_learn`)."""
        return True

    # -- parameters and introspection ---------------------------------------------------------
    def _params(self) -> Params:
        return Params(
            self.delta,
            self.grace_period,
            self.lambda_,
            self.gamma,
            self.max_depth,
            self.grace_start,
            self.leaf_model,
            self.linear_lambda,
            drop_far_terms=self._drop_far_terms,
            **blind_params(self._blind_split),
            bound_block=self.bound_block,
        )

    def get_params(self) -> dict[str, Any]:
        """Constructor arguments, as given (JSON-safe)."""
        return {
            "delta": self.delta,
            "grace_period": self.grace_period,
            "grace_start": self.grace_start,
            "leaf_model": self.leaf_model,
            "linear_lambda": self.linear_lambda,
            "lambda_": self.lambda_,
            "gamma": self.gamma,
            "bins": self.bins,
            "warm_up": self.warm_up,
            "max_depth": self.max_depth,
            "feature_names": None if self.feature_names is None else list(self.feature_names),
            "nominal": list(self.nominal),
            "max_categories": self.max_categories,
            "max_bytes": self.max_bytes,
        }

    def _saved_params(self) -> dict[str, Any]:
        """The parameters a saved model records (`get_params` unless an estimator omits a default).

        Without a memory budget `max_bytes` is left out: such a model saves the bytes of the format
        before the parameter, and a model saved before it restores unbounded."""
        params = self.get_params()
        if params.get("max_bytes", 0) is None:
            del params["max_bytes"]
        return params

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    @property
    def n_seen(self) -> int:
        """Records learned."""
        return self._n_seen

    @property
    def n_nodes(self) -> int:
        """Nodes in all trees."""
        return sum(t.n_nodes for t in self._trees)

    @property
    def n_trees(self) -> int:
        """Trees in the model (a committee has one per class but one)."""
        return len(self._trees)

    @property
    def n_leaves(self) -> int:
        return sum(t.n_leaves for t in self._trees)

    @property
    def n_splits(self) -> int:
        return sum(t.n_splits for t in self._trees)

    @property
    def n_updates(self) -> int:
        """Leaf-value updates applied (the "only update the leaf" candidate)."""
        return sum(t.n_updates for t in self._trees)

    @property
    def version(self) -> int:
        """Changes applied to the model so far: splits plus leaf-value updates."""
        return self.n_splits + self.n_updates

    @property
    def depth(self) -> int:
        """Depth of the deepest tree (a lone root has depth 0)."""
        return max((t.max_depth() for t in self._trees), default=0)

    @property
    def nbytes(self) -> int:
        """Bytes of the model's live arrays (tree nodes, split statistics, pending blocks); with
        `max_bytes`, at most that (unless every leaf is inactive: see `_fit_budget`)."""
        return sum(t.nbytes() for t in self._trees)

    def feature_importances(self) -> dict[FeatureName, float]:
        """Feature name to importance (sums to 1; all 0 before the first split or linear term): the
        mean absolute contribution of each feature over the records the leaves received recently, read
        from the model as it stands, so it follows drift (sgt.explain says how and why)."""
        return importances(self)

    @property
    def n_inactive(self) -> int:
        """Leaves the memory budget made inactive (no split statistics; they still predict and learn
        their values)."""
        return sum(int(t.n_slots - t.active[: t.n_slots].sum()) for t in self._trees)

    # -- the memory budget -----------------------------------------------------------------------
    # `max_bytes` bounds `nbytes`: it is shared out between the trees (`_tree_cap`), and each tree
    # keeps within its share by making its least promising leaves inactive (sgt.tree, "memory
    # budget"): where a split would not fit, where a category child is made, and here, where the
    # shares or the layout change (a new tree, new features or categories). A batch that would widen
    # the layout after its first row is run as several batches, each starting where the layout widens
    # (`_widening_rows`): so every tree's layout, and with it every decision, is at each row what a
    # one-record loop has there.
    def _tree_cap(self) -> int | None:
        """Bytes each tree may take: an equal share of `max_bytes` (None: unbounded)."""
        if self.max_bytes is None:
            return None
        return self.max_bytes // max(1, len(self._trees))

    def _fit_budget(self) -> None:
        """Give every tree its share of the budget and bring it within (see `Tree.fit_budget`)."""
        cap = self._tree_cap()
        for tree in self._trees:
            tree.cap = cap
            tree.fit_budget()

    def _restored(self) -> None:
        """After `from_saved` rebuilt the model: the trees' shares of the budget."""
        self._fit_budget()

    @property
    def feature_kinds(self) -> dict[FeatureName, str]:
        """Feature name to "numeric" or "nominal", for the features learned so far."""
        return self._space.kinds()

    # -- serialisation and export ------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The model in sgt's safe binary format (versioned, checksummed, no pickle; sgt.serialization).

        Header: the class name, `_saved_params`, records learned, the feature space, each tree's
        counters and `_state_extra`; arrays: the space's ranges, each tree's (``t<k>.``), then
        `_state_arrays` (``extra.``).
        """
        return encode(*self._saved_parts())

    def _saved_parts(self) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
        """The header and the named arrays `to_bytes` encodes (a model saved inside another: the boosted
        regressor's single tree)."""
        space, ranges = self._space.saved()
        header: dict[str, Any] = {
            "model": type(self).__name__,
            "params": self._saved_params(),
            "n_seen": self._n_seen,
            "space": space,
            "trees": [],
            "extra": self._state_extra(),
            "drop_far_terms": self._drop_far_terms,
        }
        if self._blind_split is not None:  # (absent: saved bytes as before the blind split existed)
            header["blind_split"] = list(self._blind_split)
        if self.bound_block is not None:  # (absent: saved bytes as before the setting existed)
            header["bound_block"] = self.bound_block
        arrays = [ranges]
        for t, tree in enumerate(self._trees):
            counters, tree_arrays = tree.saved(f"t{t}")
            header["trees"].append(counters)
            arrays += tree_arrays
        arrays += [(f"extra.{name}", a) for name, a in self._state_arrays()]
        return header, arrays

    @classmethod
    def from_bytes(cls, blob: bytes, loss: Any = None) -> Any:
        """Restore a model written by `to_bytes`; it behaves identically from then on.

        The data may hold this class or a subclass of it (`sgt.load` takes any model type). `loss`
        supplies a custom (non built-in) loss. Raises sgt.SerializationError for foreign, truncated
        or corrupted data, or another model type.
        """
        saved = decode(blob)
        kind = saved.header.get("model")
        target = next((c for c in _with_subclasses(cls) if c.__name__ == kind), None)
        if target is None:
            raise SerializationError(f"the data holds a {kind}, not a {cls.__name__}")
        return target.from_saved(saved, loss)

    @classmethod
    def from_saved(cls, saved: Saved, loss: Any = None) -> Any:
        """The model of a decoded blob written by this class's `to_bytes` (see `from_bytes`)."""
        with reading():
            header, arrays = saved.header, saved.arrays
            model = cls(**cls._params_from_saved(dict(header["params"]), loss))
            model._drop_far_terms = bool(header.get("drop_far_terms", False))
            model._blind_split = saved_blind(header.get("blind_split"))
            model.bound_block = saved_bound_block(header.get("bound_block"))
            model._space.load_saved(header["space"], arrays["space.ranges"], saved.version)
            model._layout = Layout(model._space)
            model._layout_revision = model._space.revision
            model._trees = [
                load_tree(model._params_of_tree(t), model._layout, f"t{t}", counters, arrays)
                for t, counters in enumerate(header["trees"])
            ]
            model._n_seen = int(header["n_seen"])
            model._restore_extra(header["extra"])
            extra = {name[len("extra.") :]: a for name, a in arrays.items() if name.startswith("extra.")}
            model._restore_arrays(header["extra"], extra)
            model._restored()
            return model

    @classmethod
    def _params_from_saved(cls, params: dict[str, Any], loss: Any) -> dict[str, Any]:
        """Constructor arguments from the saved parameters (the regressors resolve their loss)."""
        return params

    def _state_extra(self) -> dict[str, Any]:
        """Estimator-specific state for serialisation (JSON-safe)."""
        return {}

    def _restore_extra(self, extra: dict[str, Any]) -> None:
        """Inverse of `_state_extra`."""

    def _state_arrays(self) -> list[tuple[str, np.ndarray]]:
        """Estimator-specific arrays for serialisation (named; saved after the trees)."""
        return []

    def _restore_arrays(self, extra: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Inverse of `_state_arrays` (after `_restore_extra`; `arrays` by the names given)."""

    def _tree_groups(self) -> list[TreeGroup]:
        """The trees the views show, in groups (one group; an ensemble: one per member)."""
        return [TreeGroup("", self._trees)]

    def _view_heading(self) -> str | None:
        """A first line for the text view (an ensemble's settings), or None."""
        return None

    def to_dict(self) -> dict[str, Any]:
        """The model as nested plain data (JSON-safe): parameters, features and every tree."""
        from sgt.export import to_dict

        return to_dict(self)

    def to_text(self) -> str:
        """The trees as indented text."""
        from sgt.export import to_text

        return to_text(self)

    def to_dot(self) -> str:
        """The trees as Graphviz dot source."""
        from sgt.export import to_dot

        return to_dot(self)

    # -- encoding ------------------------------------------------------------------------------
    def _encode_batch(self, X: Any, learn: np.ndarray | None) -> np.ndarray:
        if isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind in "fiub":
            return self._space.encode_array(X, learn)
        if isinstance(X, np.ndarray) and X.ndim != 2:
            raise ValueError(f"X must be 2-D, got an array of shape {X.shape}")
        rows = list(X)
        if len(rows) == 1 and type(rows[0]) is dict:
            # one record (a boosted model's side models learn one so): `encode_one`, the same codes and
            # grids as `encode_rows` without its numpy passes per column (a fifth of a boosted
            # regressor's time one record at a time)
            learned = learn is None or bool(learn[0])
            return np.array([self._space.encode_one(rows[0], learn=learned)], dtype=CODE_DTYPE)
        return self._space.encode_rows(rows, learn)

    def _sync_layout(self) -> None:
        """Bring the trees' statistics into the feature space's current layout."""
        if self._space.revision == self._layout_revision:
            return
        self._layout_revision = self._space.revision
        if self._space.widths() == self._layout.widths:
            return
        self._layout = Layout(self._space)
        for tree in self._trees:
            tree.relayout(self._layout)
        self._fit_budget()  # wider statistics: the budget may hold fewer active leaves

    def _apply_regrids(self, regrids: Sequence[Regrid]) -> None:
        """Carry every tree over to grown numeric grids (of one record, or a bag's records).

        In feature order (a stable sort keeps one feature's grids in record order): the batch coder
        meets a record's features in an order that may differ from the record's own, and the linear
        leaves' re-expression adds each feature's offset to the values, where order changes the bits.
        """
        for regrid in sorted(regrids, key=lambda r: r.feature):
            for tree in self._trees:
                tree.regrid(regrid)

    def _params_of_tree(self, t: int) -> Params:
        """The parameters of the model's tree `t` (all the same but in a regressor with
        `leaf_model="auto"`, whose trees differ in their leaf model)."""
        return self._params()

    def _new_tree(self, root_value: float = 0.0) -> None:
        self._trees.append(Tree(self._params_of_tree(len(self._trees)), self._layout, root_value))
        self._fit_budget()  # (at a new target's row: the shares are smaller)

    # -- the one-record path -------------------------------------------------------------------
    def _raw_one(self, nodes: Sequence[int], codes: Sequence[int] | np.ndarray) -> list[float]:
        """Raw scores (one per tree) of a record with `codes` that sits at `nodes`."""
        base = self._base()
        if len(nodes) == self._n_raw_scores():  # single-output trees only
            return [tree.predict_one(node, codes) + base for tree, node in zip(self._trees, nodes)]
        return [
            v + base for tree, node in zip(self._trees, nodes) for v in tree.predict_outputs_one(node, codes)
        ]

    def _gradients_one(self, raw: list[float], target: Any) -> tuple[list[float], list[float]]:
        """`_gradients` for one record (subclasses may avoid numpy, with identical arithmetic)."""
        g, h = self._gradients(np.array(raw).reshape(len(raw), 1), np.array([target]))
        return g[:, 0].tolist(), h[:, 0].tolist()

    def _predict_raw_one(self, x: Any) -> list[float]:
        if not self._keeps_last:
            return self._predict_raw_codes(self._space.encode_one(x, learn=False))
        return self._published(self._scored_one(x)[2])

    def _predict_raw_codes(self, codes: Sequence[int] | np.ndarray) -> list[float]:
        """`_predict_raw_one` of a record already encoded in the model's space (a model that also
        needs the codes for something else, or shares its space with another, encodes it once)."""
        return self._published(self._raw_one([tree.route_one(codes)[0] for tree in self._trees], codes))

    def _published(self, raw: list[float]) -> list[float]:
        """The raw scores a prediction gives from the trees' (`_raw_one`; the regressor adds its trend
        offset)."""
        return raw

    def _scored_one(self, x: Any) -> tuple[list[int], list[int], list[float]]:
        """One record's codes, the leaves it reaches and the trees' raw scores (`_raw_one`), as a
        prediction finds them; kept for `_learn_one` (`LastRecord`), and taken again while it holds."""
        last = self._kept(x)
        if last is not None:
            return last.codes, last.nodes, last.raw
        space = self._space
        codes = space.encode_one(x, learn=False)
        routes = [tree.route_one(codes) for tree in self._trees]
        nodes = [node for node, _ in routes]
        raw = self._raw_one(nodes, codes)
        self._last = None
        # (not before the first learned record, whose target may set the base score in the raw scores)
        if self._keeps_last and self._n_seen and type(x) is dict and not any(s for _, s in routes):
            names, values = tuple(x), tuple(x.values())
            self._last = LastRecord(x, names, values, self._n_seen, space.revision, codes, nodes, raw)
        return codes, nodes, raw

    def _kept(self, x: Any) -> LastRecord | None:
        """The kept record if `x` is it, unchanged, the model and its space as they were, and learning
        would encode it as predicting did (`FeatureSpace.settled`: its grids no longer grow, so its
        codes are as they were however the space is shared); else None."""
        last = self._last
        if last is None or not last.holds(x, self._n_seen, self._space.revision):
            return None
        return last if self._space.settled(zip(last.names, last.values)) else None

    def _learn_codes(
        self,
        codes: Sequence[int] | np.ndarray,
        target: Any,
        predicted: tuple[list[int], list[float]] | None = None,
    ) -> list[tuple[int, int]]:
        """Learn one encoded record; return (tree, node) pairs whose routing changed. `predicted`: the
        leaves the record reached and its raw scores, as just predicted if no tree has changed since
        and none stopped it at a nominal branch; they are taken unless its target brings new outputs
        (a model whose base score a target sets must not give them)."""
        outputs = None if predicted is None else self._n_raw_scores()
        self._register_target(target)
        changed: list[tuple[int, int]] = []
        if predicted is not None and self._n_raw_scores() == outputs:
            nodes, raw = predicted
        else:
            nodes = []
            for t, tree in enumerate(self._trees):
                node, stopped = tree.route_one(codes)
                if stopped:
                    changed.append((t, node))
                    node = tree.add_category_child(node, int(codes[tree.feature[node]]))
                nodes.append(node)
            raw = self._raw_one(nodes, codes)
        self._observe_learn(nodes, raw, target, codes)
        if self._trees:
            g, h = self._gradients_one(raw, target)
            for t, (tree, c) in enumerate(zip(self._trees, self._tree_columns())):
                if tree.learn_one(nodes[t], codes, g[c], h[c], self._space):
                    changed.append((t, nodes[t]))
        self._n_seen += 1
        return changed

    def _prepare_target_one(self, y: Any) -> Any:
        """`_prepare_targets` for a single learned record (subclasses may do it faster)."""
        return self._prepare_targets([y], np.ones(1, dtype=bool))[0][0]

    def _tree_target_one(self, target: Any) -> Any:
        """What the trees learn for one learned record's checked target (the regressor's trend offset
        takes it here); called once the record is encoded, so that a bad record changes nothing."""
        return target

    def _learn_one(self, x: Any, y: Any) -> None:
        last = self._kept(x)
        self._last = None
        target = self._prepare_target_one(y)
        if last is not None:
            # as just predicted: learning encodes it alike and changes nothing in the space (LastRecord)
            self._learn_codes(last.codes, self._tree_target_one(target), (last.nodes, last.raw))
            return
        codes = self._space.encode_one(x, learn=True)  # (a bad record raises here, before any learning)
        self._sync_layout()
        self._apply_regrids(self._space.take_regrids())
        self._learn_codes(codes, self._tree_target_one(target))

    # -- the batch path ------------------------------------------------------------------------
    def _run(self, X: Any, y: Sequence[Any] | None, out: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Predict then learn each row in order; return raw scores [rows, trees] and outputs per row.

        `y[i] is None` (or `y is None`) means row i is only predicted. `out` is handed to the
        `_observe_row` and `_observe_plain` hooks (where an estimator collects its own outputs).
        """
        rows = self._encoded_rows(X, y)
        if isinstance(rows, np.ndarray):  # (cut by a memory budget: each part encodes its own rows)
            return self._run_parts(X, y, out, rows)
        self._sync_layout()
        return self._run_codes(rows.codes, rows.targets, rows.learn, rows.events, out, rows.regrids)

    def _encoded_rows(self, X: Any, y: Sequence[Any] | None) -> EncodedRows | np.ndarray:
        """A batch encoded, with its targets checked, as `_run` (and an ensemble's) runs it; or, where a
        memory budget cuts it (`_widening_rows`), the rows where its parts start, with the feature
        space as it was. A bad record anywhere in the batch raises and changes nothing."""
        n = len(X)
        if y is not None and len(y) != n:
            raise ValueError(f"X has {n} rows but y has {len(y)} targets")
        learn = np.zeros(n, dtype=bool) if y is None else np.array([t is not None for t in y], dtype=bool)
        snapshot = self._space.snapshot()
        try:
            codes = self._encode_batch(X, learn)
            # (every target checked before any part of the batch is learned)
            targets, events = self._prepare_targets(y if y is not None else [None] * n, learn)
            cuts = self._widening_rows(snapshot, codes, learn)
        except Exception:
            self._space.restore(snapshot)  # a bad record anywhere in the batch changes nothing
            raise
        if cuts.size:
            return cuts
        # a grown grid is an event at its record: predicted on the old grid, then learned on the new
        regrids: dict[int, list[Regrid]] = {}
        for regrid in self._space.take_regrids():
            regrids.setdefault(regrid.row, []).append(regrid)
        return EncodedRows(codes, learn, targets, events, regrids)

    def _widening_rows(self, snapshot: tuple[Any, ...], codes: np.ndarray, learn: np.ndarray) -> np.ndarray:
        """With a memory budget, the rows after the first where a one-record loop would widen the layout
        (a feature or a category that changes the widths is first learned there); the space is restored
        to `snapshot` if there are any. None without a budget, nor for a batch that widens nothing."""
        if self.max_bytes is None or self._space.widths() == self._layout.widths:
            return np.zeros(0, dtype=np.intp)
        cuts = widening_rows(snapshot, self._space, codes, learn)
        if cuts.size:
            self._space.restore(snapshot)
        return cuts

    def _run_parts(
        self, X: Any, y: Sequence[Any] | None, out: Any, cuts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """`_run` of rows [0, cuts[0]), [cuts[0], cuts[1]), ... in turn, as one run's result (every
        learning path gives the same model whatever the batches)."""
        return run_parts(self, X, y, out, cuts)

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
        """`_run` after encoding (`sgt.chunked.run_codes` says what each argument is): a method so
        that an ensemble can encode a batch once and run each member on the codes."""
        return run_codes(self, codes, targets, learn, target_events, out, regrids, inputs, routes)

    def _learn_fill(
        self, nodes: list[int], codes: np.ndarray, g: np.ndarray, h: np.ndarray
    ) -> list[tuple[int, int]]:
        """`_learn_codes` for a record that fills a leaf (no new target, no new category) whose nodes
        and gradients are known; return the (tree, node) pairs whose routing changed."""
        changed = []
        for t, (tree, node, c) in enumerate(zip(self._trees, nodes, self._tree_columns())):
            g_t, h_t = (float(g[c]), float(h[c])) if isinstance(c, int) else (g[c].tolist(), h[c].tolist())
            if tree.learn_one(node, codes, g_t, h_t, self._space):
                changed.append((t, node))
        self._n_seen += 1
        return changed


def _with_subclasses(cls: type[BaseSGT]) -> Iterator[type[BaseSGT]]:
    """`cls` and every class derived from it, depth first."""
    yield cls
    for sub in cls.__subclasses__():
        yield from _with_subclasses(sub)


def saved_bound_block(saved: Any) -> int | None:
    """The `bound_block` setting a save holds, checked (SerializationError if not an integer >= 2)."""
    try:
        return checked_bound_block(saved)
    except ValueError as error:
        raise SerializationError(str(error)) from None


def blind_params(blind: tuple[float, float] | None) -> dict[str, Any]:
    """The tree parameters of a blind split setting (Params.blind_after, blind_impurity)."""
    if blind is None:
        return {"blind_after": None, "blind_impurity": Params.blind_impurity}
    return {"blind_after": blind[0], "blind_impurity": blind[1]}


def saved_blind(saved: Any) -> tuple[float, float] | None:
    """The blind split setting a save holds ([grace periods, impurity]), checked; None if none."""
    if saved is None:
        return None
    if (
        not isinstance(saved, list)
        or len(saved) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in saved)
        or not (saved[0] > 0 and 0 <= saved[1] <= 1)
    ):
        raise SerializationError(
            f"blind_split must be [grace periods > 0, impurity in [0, 1]], got {saved!r}"
        )
    return float(saved[0]), float(saved[1])
