"""What a tree is built from: its hyperparameters (`Params`), where each feature's split statistics
live in a leaf (`Layout`, derived from the feature space) and the inputs a linear leaf multiplies
its weights by (`leaf_inputs`, `LeafInputs`).

>>> from sgt.features import FeatureSpace
>>> space = FeatureSpace(bins=4, warm_up=3)
>>> _ = space.encode_rows([{"a": 0.0, "c": "x"}, {"a": 3.0, "c": "y"}], learn=None)
>>> layout = Layout(space)
>>> layout.n_features, layout.numeric.tolist(), layout.nominal
(2, [0], [1])
>>> leaf_inputs(np.array([0, 1, 4]), 4).tolist()
[0.0, -0.375, 0.375]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from sgt.features import FeatureSpace

__all__ = [
    "Layout",
    "LeafInputs",
    "Params",
    "checked_bound_block",
    "leaf_input",
    "leaf_inputs",
    "leaf_inputs_of",
]


@dataclass(frozen=True)
class Params:
    """The hyperparameters a tree needs (validated by the estimator): the paper's delta (the F-test's
    level), grace_period, lambda_ (the value step's L2 term) and gamma (the cost of a split), the
    maximum depth, and the linear leaves' settings (see each field's comment)."""

    delta: float
    grace_period: int
    lambda_: float
    gamma: float
    max_depth: int | None
    grace_start: int | None = None  # a new leaf's first block; None: grace_period (the paper's)
    # "constant", "linear" (a linear term per leaf, see Tree.predict_rows) or "adaptive" (a linear term
    # that each leaf serves only while it predicts better than the leaf's constant: LeafLearner._choose)
    leaf_model: str = "constant"
    linear_lambda: float = 0.01  # L2 regularisation of the linear term's Newton steps
    linear_steps: bool = True  # whether a linear leaf's attempts step its linear term (else it stays)
    # None, or t: an attempt drops a linear leaf's term when its block's loss is significantly lower
    # without it (a t statistic below -t; see LeafLearner._newton_linear and sgt.linear_gate.drop_changes)
    linear_gate: float | None = None
    # "adaptive": the weight each attempt keeps of a leaf's tally of its linear term's loss change (the
    # blocks before it fade by this factor; see sgt.linear_term.LinearTermSteps._choose; why 0.5:
    # docs/decisions.md)
    leaf_fading: float = 0.5
    # "adaptive": None, or the largest step of the level of the predictor a leaf does not serve, taken
    # from its gradients estimated at the served predictor's (a classification tree's bound:
    # sgt.linear_term.CLASSIFIER_LEVEL_STEP_BOUND; a regression tree's estimate is exact for squared error)
    level_step_bound: float | None = None
    # None, or the share of the features a split attempt may split on, drawn anew at each attempt
    # (random subspaces, as in random forests: sgt.leaf.subspace); `feature_seed` makes the draws of
    # one tree (an ensemble's member) differ from another's
    feature_share: float | None = None
    feature_seed: tuple[int, ...] = ()
    # whether a grid that grows at once by its number of bins or more moves a linear term into the
    # value rather than rescale it (see Tree._regrid_weights); the models set it, saved models before
    # it restore without it
    drop_far_terms: bool = False
    # None, or a growth g > 1: a leaf's F-test level relaxes with the records n its statistics hold (those
    # since its last split or value update), to delta * g^(n / grace_period), at most `relax_cap` (and
    # never below delta); a leaf that finds no split for long splits on weaker evidence. With
    # `relax_impurity` only while the leaf's predictions are that uncertain (see
    # sgt.leaf.LeafLearner._level). A function of the statistics alone: no state, every path alike
    relax_growth: float | None = None
    relax_cap: float = 0.1
    relax_impurity: float | None = None
    # None, or k: a leaf whose statistics hold k grace periods of records since its last split or value
    # update, whose best candidate failed its F-test and whose predictions are still near a coin toss (an
    # impurity of `blind_impurity` or more, as `relax_impurity`), splits anyway: at that candidate if it
    # is a split, else at the median of a numeric feature chosen by its depth. Where no single split gains
    # (an XOR) the children can find the gain the parent's records hide (see
    # sgt.leaf.LeafLearner._blind_candidate)
    blind_after: float | None = None
    blind_impurity: float = 0.49
    # None, or k >= 2: a leaf at the depth bound (`max_depth`), which can never split, keeps doubling its
    # blocks past grace_period up to k grace periods: its attempts only refine its value, and fewer of
    # them cost less time (see sgt.tree.Tree.block_limit); an attempt that moves its value (a concept
    # that changed) starts it over at grace_period. None: every leaf's blocks stop at grace_period
    bound_block: int | None = None

    def __post_init__(self) -> None:
        checked_bound_block(self.bound_block)


def checked_bound_block(bound: Any) -> int | None:
    """`bound` as `Params.bound_block` (ValueError, naming the setting, if it is not None or an
    integer >= 2)."""
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 2):
        raise ValueError(f"bound_block must be None or an integer >= 2, got {bound!r}")
    return bound


class Layout:
    """Where each feature's split statistics live in a slot, derived from a FeatureSpace.

    Parameters
    ----------
    space:
        The feature space: its features' kinds and widths (numeric: bins + 1 codes; nominal: the
        categories known, + 1), in order. Made anew whenever the widths change.
    """

    def __init__(self, space: FeatureSpace) -> None:
        self.widths = space.widths()
        self.offsets = np.concatenate([[0], np.cumsum(self.widths)]).astype(np.intp)
        self.n_columns = int(self.offsets[-1])
        self.n_features = len(self.widths)
        self.bins = space.bins
        self.numeric = np.array([j for j in range(self.n_features) if not space.is_nominal(j)], dtype=np.intp)
        self.nominal = [j for j in range(self.n_features) if space.is_nominal(j)]
        self.numeric_columns = (self.offsets[self.numeric][:, None] + np.arange(self.bins + 1)).astype(
            np.intp
        )
        # a linear leaf's input of each numeric code 0..bins (leaf_inputs by table lookup), also as
        # Python floats for the one-record path
        self.inputs = leaf_inputs(np.arange(self.bins + 1), self.bins)
        self.input_list: list[float] = self.inputs.tolist()
        self.numeric_list: list[int] = self.numeric.tolist()
        # a linear leaf's Hessian is symmetric: its Newton step sums the products of the pairs
        # i <= j of numeric features only, and `pair_of[i, j]` finds either order's pair
        first, second = np.triu_indices(self.numeric.size)
        self.pairs = (first, second)
        self.pair_of = np.zeros((self.numeric.size, self.numeric.size), dtype=np.intp)
        self.pair_of[first, second] = self.pair_of[second, first] = np.arange(first.size)

    def numeric_within(self, width: int) -> np.ndarray:
        """The numeric features among the first `width` (codes of an older, narrower layout)."""
        return self.numeric[self.numeric < width]


class LeafInputs(NamedTuple):
    """A batch's linear-leaf inputs, computed once for every tree (and every member of an ensemble)."""

    columns: np.ndarray  # the numeric features the codes hold, in layout order
    values: np.ndarray  # [rows, columns]: each row's input of those features (Layout.inputs)
    every_column: bool  # columns are all the layout's features, 0, 1, ...: no selection needed


def leaf_inputs_of(layout: Layout, codes: np.ndarray) -> LeafInputs:
    """The inputs a linear leaf multiplies its weights by, for every row of `codes` (codes of an older,
    narrower layout hold fewer features)."""
    columns = layout.numeric_within(codes.shape[1])
    every = columns.size == layout.n_features
    return LeafInputs(columns, layout.inputs[codes if every else codes[:, columns]], every)


def leaf_inputs(codes: np.ndarray, bins: int) -> np.ndarray:
    """A linear leaf's inputs: each numeric code's bin centre on the grid, as a fraction of the grid
    minus 1/2 (in [-1/2, 1/2]); 0 for a missing value, which then adds nothing."""
    return np.where(codes == 0, 0.0, (codes - (bins + 1) / 2.0) / bins)


def leaf_input(code: int, bins: int) -> float:
    """`leaf_inputs` of one non-missing code, as a Python float (same operations)."""
    return (code - (bins + 1) / 2.0) / bins
