"""Explanations: each feature's contribution to one prediction, and the model's feature importances.

**A record's explanation** (`explain_one`) splits a raw score into a base value, the same for every
record, plus one contribution per feature (path contributions, after Saabas). Along the record's path
through a tree, each split moves the estimate from the node's value to its child's value: that change
is credited to the split's feature. A linear leaf (``leaf_model="linear"``) adds its terms w_j * x_j,
each credited to its feature j; an adaptive leaf (``leaf_model="adaptive"``) adds them while it serves
its linear term, and while it serves its constant, value + anchor, that constant is its estimate.
The tree's score is then its root value plus the contributions, so with the root values in the base
the contributions sum with it to the score (up to the rounding of a few additions: within 1e-9 of it,
not bit for bit). An ensemble's explanation is its members', combined
as the ensemble combines their scores: the base score plus the learning rate times their sum.

What is explained is the *raw score*: a regressor's prediction before its loss's link (for squared
error, the prediction itself; for the Poisson loss, the log of the predicted mean); a classifier's
logit of each class against the first class (the reference, whose logit is 0), before any calibration,
smoothing or mixing of its probabilities. A classifier's explanation is therefore one per class from
the second on. A boosted classifier serving a candidate with its single tree or forest explains that
candidate (`BoostedClassifier.explain_one`): the models' terms blended with its weights (`on_features`
moves the forest's to the model's features), the base moved so that each class totals the log ratio of
the probabilities it serves; a boosted regressor its served prediction alike.

**Feature importances** (`feature_importances`) are the mean absolute contribution of each feature
over the records the leaves received recently: each leaf's path contributions, and its linear terms at
the mean absolute input (1/4 on the leaves' scale of [-1/2, 1/2]), are weighted by the records the leaf
has seen since its value last moved (plus one), summed over the trees (an ensemble's scaled by its
learning rate) and normalised to sum to 1. They are computed from the model as it stands, on demand: no
state is kept beside the trees, so the learning paths pay nothing and exactness is untouched. They
follow drift because everything they read does: leaf counts restart whenever a leaf moves, the leaf
values and linear terms track the current concept, and the drift responses (the adaptive trees, the
ensembles) replace the trees of an old concept, whose splits then stop counting. A decayed sum of the
learned records' contributions, the alternative, would cost an explanation per learned record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sgt.features import FeatureName
from sgt.tree import NO_NODE, Tree

__all__ = ["Explanation", "blended_importances", "explain_raw", "importances", "on_features"]

#: the mean absolute leaf input of a feature spread evenly over its grid ([-1/2, 1/2])
MEAN_ABS_INPUT = 0.25


@dataclass(frozen=True)
class Explanation:
    """One raw score explained: `base` plus the sum of `contributions` (feature name to share) is
    `score` (within 1e-9 of it)."""

    base: float
    contributions: dict[FeatureName, float]
    score: float

    def top(self, k: int) -> list[tuple[FeatureName, float]]:
        """The `k` features of largest absolute contribution, largest first (ties: name order, strings
        before integers, which never compare with them)."""
        ranked = sorted(
            self.contributions.items(),
            key=lambda item: (-abs(item[1]), not isinstance(item[0], str), item[0]),
        )
        return ranked[:k]


def _serves_constant(tree: Tree, node: int) -> bool:
    """Whether an adaptive leaf (``leaf_model="adaptive"``) serves its constant, value + anchor, at
    `node` rather than its linear term: its anchor is then part of its estimate, and it has no terms."""
    return bool(getattr(tree, "adaptive", False) and not tree.serving[node])


def _estimate(tree: Tree, node: int) -> np.ndarray:
    """The node's estimate as a record that ends there sees it, before any linear term."""
    value = np.reshape(tree.value[node], tree.n_outputs)
    return value + tree.anchor[node] if _serves_constant(tree, node) else value


def tree_terms(tree: Tree, codes: Sequence[int] | np.ndarray, n_features: int) -> np.ndarray:
    """[outputs, 1 + n_features]: a tree's root value(s), then each feature's contribution to its
    score(s) for a record with `codes`."""
    node, _ = tree.route_one(codes)
    k = tree.n_outputs
    if k == 1:
        return _single_output_terms(tree, node, codes, n_features)
    path = [node]
    parent = int(tree.parent[node])
    while parent != NO_NODE:
        path.append(parent)
        parent = int(tree.parent[parent])
    terms = np.zeros((k, 1 + n_features))
    values = np.reshape(tree.value[path], (len(path), k))
    values[0] = _estimate(tree, node)
    terms[:, 0] = values[-1]
    if len(path) > 1:  # each split's change of estimate, to its feature (children before parents)
        changes = values[:-1] - values[1:]
        features = tree.feature[path[1:]].tolist()
        for change, feature in zip(changes, features):
            terms[:, 1 + feature] += change
    if tree.linear and not _serves_constant(tree, node):
        numeric = [j for j in tree.layout.numeric_list if j < len(codes)]
        if numeric:
            weights = np.reshape(tree.weights[node], (k, -1))[:, numeric]
            inputs = tree.layout.inputs[np.asarray(codes, dtype=np.intp)[numeric]]
            terms[:, 1 + np.asarray(numeric, dtype=np.intp)] += weights * inputs
    return terms


def _single_output_terms(
    tree: Tree, node: int, codes: Sequence[int] | np.ndarray, n_features: int
) -> np.ndarray:
    """`tree_terms` of a single-output tree at `node`, in Python floats (the common case, faster)."""
    out = [0.0] * (1 + n_features)
    value, parents, features = tree.value, tree.parent, tree.feature
    child, parent = node, int(parents[node])
    constant = _serves_constant(tree, node)
    below = float(value[child]) + (float(tree.anchor[child]) if constant else 0.0)
    while parent != NO_NODE:
        above = float(value[parent])
        out[1 + int(features[parent])] += below - above
        child, below, parent = parent, above, int(parents[parent])
    out[0] = below  # the root's value (a lone root's estimate)
    if tree.linear and not constant:
        weights, inputs, n = tree.weights[node].tolist(), tree.layout.input_list, len(codes)
        for j in tree.layout.numeric_list:
            if j < n:
                out[1 + j] += weights[j] * inputs[int(codes[j])]
    return np.array([out])


def explain_raw(model: Any, x: Any) -> np.ndarray:
    """[scores, 1 + features]: each raw score of `model` for record `x` (as `_predict_raw_one` gives
    them) as its base, then its contribution per feature (in the feature space's order)."""
    codes = model._space.encode_one(x, learn=False)
    n_features = len(model._space)
    if hasattr(model, "_members"):
        terms = _ensemble_terms(model, codes, n_features)
        served = getattr(model, "_served_terms", None)  # (the boosted regressor's choice of prediction)
        return terms if served is None else served(terms, x)
    rows = [tree_terms(tree, codes, n_features) for tree in model._trees]
    if not rows:
        return np.zeros((0, 1 + n_features))
    terms = np.concatenate(rows)
    terms[:, 0] += model._base()
    return terms


def _ensemble_terms(model: Any, codes: Sequence[int], n_features: int) -> np.ndarray:
    """`explain_raw` of a boosted ensemble: its base columns plus the learning rate times each
    member's terms, in the columns `_predict_raw_one` puts them, then its reference scores."""
    columns = model._n_raw(0) + int(model._outputs.every_class_from_three)
    base = model._base_columns(1, columns, np.zeros(1, dtype=bool), np.zeros(1), np.zeros(0, dtype=np.intp))
    terms = np.zeros((columns, 1 + n_features))
    terms[:, 0] = base[0][0]
    for member in model._members:
        rows = [tree_terms(tree, codes, n_features) for tree in member.trees]
        if not rows:
            continue
        first = model._outputs.first_column(member.n_outputs)
        member_terms = np.concatenate(rows)
        terms[first : first + member_terms.shape[0]] += model._step() * member_terms
    offset = model._output_offset(float(terms[0].sum()))  # (the regressor's residual level)
    if offset:
        terms[0, 0] += offset
    if model._outputs.every_class_from_three:  # each class's score less the first's (a linear map)
        terms = terms[1:] - terms[:1]
    return terms[: model._n_scores()]


def on_features(terms: np.ndarray, names: Sequence[FeatureName], onto: Sequence[FeatureName]) -> np.ndarray:
    """`terms` [scores, 1 + features] of a model whose features are `names`, on the features `onto` of
    another (a boosted classifier's forest keeps a feature space of its own): each contribution in the
    column of its feature's name, 0 for a feature of `onto` it lacks, and the contribution of a feature
    `onto` lacks added to the base (so each row's total is kept); `terms` itself if the two agree."""
    if list(names) == list(onto):
        return terms
    column = {name: j for j, name in enumerate(onto)}
    out = np.zeros((terms.shape[0], 1 + len(column)))
    out[:, 0] = terms[:, 0]
    for j, name in enumerate(names):
        target = 1 + column[name] if name in column else 0
        out[:, target] += terms[:, 1 + j]
    return out


def blended_importances(
    candidate: Any, per_model: Mapping[str, Mapping[FeatureName, float]], names: Sequence[FeatureName]
) -> dict[FeatureName, float]:
    """The importances of what a boosted model with side models serves: `candidate`
    (sgt.boosted.tree_choice.Candidate) blends its models' importances `per_model` (by the candidate's
    model names; each normalised, on the features `names` by name, 0 for a feature a model lacks) with
    its weights, as it blends their predictions, normalised again; a lone model's are its own.

    >>> from sgt.boosted.tree_choice import Candidate
    >>> per_model = {"ensemble": {"a": 1.0}, "forest": {"b": 1.0}}
    >>> blended_importances(Candidate("ensemble", "forest", 0.5), per_model, ["a", "b"])
    {'a': 0.5, 'b': 0.5}
    """
    shares = {name: np.array([own.get(feature, 0.0) for feature in names]) for name, own in per_model.items()}
    total = np.asarray(candidate.of(shares), dtype=np.float64)
    norm = float(total.sum())
    if len(shares) > 1 and norm > 0:
        total = total / norm
    return dict(zip(names, total.tolist()))


def explanations(model: Any, x: Any) -> list[Explanation]:
    """One `Explanation` per raw score of `model` for record `x`."""
    terms = explain_raw(model, x)
    names = list(model._space.names)
    out = []
    for row in terms:
        contributions = dict(zip(names, row[1:].tolist()))
        base = float(row[0])
        out.append(Explanation(base, contributions, base + float(np.sum(row[1:]))))
    return out


def importances(model: Any) -> dict[FeatureName, float]:
    """Feature name to importance (see the module's docstring): non-negative, summing to 1 once the
    model has split or fitted a linear term, all 0 before."""
    names = list(model._space.names)
    n_features = len(names)
    total = np.zeros(n_features)
    if hasattr(model, "_members"):
        for member in model._members:
            for tree in member.trees:
                total += model._step() * _tree_importance(tree, n_features)
    else:
        for tree in model._trees:
            total += _tree_importance(tree, n_features)
    norm = float(total.sum())
    if norm > 0:
        total = total / norm
    return dict(zip(names, total.tolist()))


def _tree_importance(tree: Tree, n_features: int) -> np.ndarray:
    """One tree's traffic-weighted mean absolute contribution per feature (all outputs summed)."""
    out = np.zeros(n_features)
    n = tree.n_nodes
    leaves = np.flatnonzero(tree.feature[:n] < 0)
    weights = np.array([tree.leaf_count(int(leaf)) + 1.0 for leaf in leaves])
    weights /= weights.sum()
    for leaf, weight in zip(leaves.tolist(), weights.tolist()):
        parent = int(tree.parent[leaf])
        below = _estimate(tree, leaf)
        while parent != NO_NODE:
            above = np.reshape(tree.value[parent], tree.n_outputs)
            out[int(tree.feature[parent])] += weight * float(np.abs(below - above).sum())
            below, parent = above, int(tree.parent[parent])
        if tree.linear and not _serves_constant(tree, leaf):
            w = np.abs(np.reshape(tree.weights[leaf], (tree.n_outputs, -1))).sum(axis=0)
            m = min(n_features, w.size)
            out[:m] += weight * MEAN_ABS_INPUT * w[:m]
    return out
