"""A measurement sketch, not the library: boosted SGT members with one multi-output tree each.

``sgt.BoostedClassifier`` gives each member one tree per class but one (K - 1 trees, softmax with a
reference class), so on RBF with five classes its 10 members hold 40 trees, each with its own
partition and split attempts (about 80% of its time there). Multiclass gradient-boosting libraries
grow ONE tree per stage whose leaves hold a vector of K values, and choose splits on the loss change
summed over the outputs. This module measures what that would give before the library is changed:
it runs the boosted ensemble both ways with the same (simplified) SGT, so the difference between
the two is the structure alone.

    python -m tests.bench.multioutput_prototype --stream rbf-5 --records 20000 \\
        split multi:full=1 multi:full=1:delta=0.03

A variant is ``MODE[:key=value...]``: MODE ``split`` (a tree per output, as the library) or ``multi``
(one tree per member); ``full=1`` gives every class an output (K; plain softmax) instead of K - 1
beside a reference class; ``diag=1`` takes a candidate's variance as the sum of the outputs' own
variances (what per-output statistics allow) instead of the variance of the summed per-record loss
change; ``M``, ``lr`` and ``seed`` set the ensemble; the SGT's ``delta``, ``grace``, ``start``,
``lambda``, ``gamma``, ``linear`` (0: constant leaves) and ``linear_lambda`` its trees.

What it keeps of the library's SGT: the Newton step on mean gradients and Hessians, a split's mean
loss change with the penalty gamma |Q| / n, the F-test at `delta` against the null candidate (update
the value only), statistics kept across failed attempts, first blocks of grace_start * 2^depth
doubling up to the grace period, linear leaves (a Newton step of each output's weights on the block,
on inputs centred on its h-weighted mean) inherited by the children, online bagging with Poisson(1)
weights, learning rate 0.3 and lambda 0.5, and prequential accuracy. What it simplifies, the same for
both structures: each feature's 64 equal-width bins span its range over the whole stream (the library
grows its grids from the data seen), there is no drift detection, no nominal features, and a
candidate's variance is computed from the block's records themselves rather than from moment
statistics. Its wall time is pure Python: compare the structures by the split attempts they make, and
the library's speed with one tree per member by folding a stream's labels to two classes.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
from scipy.special import fdtrc

from tests.bench.streams import materialise, specs

BINS = 64
#: streams built here from River's generators (beside the benchmark's own, by name)
RIVER_STREAMS = ("waveform", "led")


@dataclass(frozen=True)
class TreeParams:
    """The simplified SGT's settings (the library's names in the docstring of the module)."""

    delta: float = 1e-3
    grace: int = 100
    start: int = 10
    lambda_: float = 0.5
    gamma: float = 0.02
    linear: bool = True
    linear_lambda: float = 0.01
    diag: bool = False


@dataclass
class _Leaf:
    """A leaf's records since its statistics were last reset, and where its current block starts."""

    codes: list[np.ndarray] = field(default_factory=list)
    g: list[np.ndarray] = field(default_factory=list)
    h: list[np.ndarray] = field(default_factory=list)
    block: int = 0  # records until the next attempt
    filled: int = 0  # records of the current block so far
    block_start: int = 0  # index in the lists where the current block starts


class Tree:
    """An SGT whose leaves hold `k` values (and `k` linear terms); `k` 1 is the library's tree."""

    def __init__(self, k: int, n_features: int, params: TreeParams) -> None:
        self.k, self.n_features, self.params = k, n_features, params
        self.feature, self.threshold, self.children = [-1], [0], [(0, 0)]
        self.value, self.weights, self.depth = [np.zeros(k)], [np.zeros((k, n_features))], [0]
        self.leaves = {0: _Leaf(block=self._first_block(0))}
        self.attempts = 0
        self.splits = 0

    def _first_block(self, depth: int) -> int:
        grace, start = self.params.grace, self.params.start
        return grace if start << min(depth, 40) >= grace else start << depth

    def route(self, codes: np.ndarray) -> int:
        node = 0
        while self.feature[node] >= 0:
            left, right = self.children[node]
            node = left if codes[self.feature[node]] <= self.threshold[node] else right
        return node

    def predict(self, node: int, inputs: np.ndarray) -> np.ndarray:
        if not self.params.linear:
            return self.value[node]
        return self.value[node] + self.weights[node] @ inputs

    def learn(self, node: int, codes: np.ndarray, g: np.ndarray, h: np.ndarray) -> None:
        leaf = self.leaves[node]
        leaf.codes.append(codes)
        leaf.g.append(g)
        leaf.h.append(h)
        leaf.filled += 1
        if leaf.filled >= leaf.block:
            leaf.filled = 0
            self._attempt(node, leaf)

    def _newton_linear(self, node: int, codes: np.ndarray, g: np.ndarray, h: np.ndarray) -> None:
        """One Newton step of each output's linear term on the block (centred inputs, as the library)."""
        z = _inputs(codes)
        value, weights = self.value[node].copy(), self.weights[node].copy()
        for k in range(self.k):
            h_sum = h[:, k].sum()
            if not h_sum > 0:
                continue
            centre = (h[:, k : k + 1] * z).sum(axis=0) / h_sum
            zc = z - centre
            gradient = (g[:, k : k + 1] * zc).mean(axis=0)
            hessian = (zc * h[:, k : k + 1]).T @ zc / len(z) + self.params.linear_lambda * np.eye(z.shape[1])
            step = np.linalg.solve(hessian, gradient)
            if np.all(np.isfinite(step)):
                weights[k] -= step
                value[k] += step @ centre
        self.value[node], self.weights[node] = value, weights

    def _attempt(self, node: int, leaf: _Leaf) -> None:
        self.attempts += 1
        params = self.params
        codes, g, h = np.array(leaf.codes), np.array(leaf.g), np.array(leaf.h)
        if params.linear:
            b = leaf.block_start
            self._newton_linear(node, codes[b:], g[b:], h[b:])
        leaf.block_start = len(codes)
        best = self._best_candidate(codes, g, h)
        passed = best.mean < 0 and self._p_value(best, codes, g, h) < params.delta
        if not (passed and best.feature >= 0):
            leaf.block = min(2 * leaf.block, params.grace)
        if not passed:
            return
        if best.feature < 0:
            self.value[node] = self.value[node] + best.deltas[0]
            self.leaves[node] = _Leaf(block=leaf.block)
            return
        self._split(node, best)

    def _best_candidate(self, codes: np.ndarray, g: np.ndarray, h: np.ndarray) -> _Candidate:
        lam, n = self.params.lambda_, len(codes)
        null = -g.mean(axis=0) / (h.mean(axis=0) + lam)
        best = _Candidate(float(_loss_change(g, h, null).sum(axis=1).mean()), -1, 0, (null,))
        for f in range(self.n_features):
            count = np.bincount(codes[:, f], minlength=BINS).astype(float)
            g_bins = np.stack([np.bincount(codes[:, f], g[:, k], minlength=BINS) for k in range(self.k)], 1)
            h_bins = np.stack([np.bincount(codes[:, f], h[:, k], minlength=BINS) for k in range(self.k)], 1)
            n_left = np.cumsum(count)[:-1]
            g_left, h_left = np.cumsum(g_bins, 0)[:-1], np.cumsum(h_bins, 0)[:-1]
            n_right, g_right, h_right = n - n_left, g_bins.sum(0) - g_left, h_bins.sum(0) - h_left
            usable = (n_left > 0) & (n_right > 0)
            if not usable.any():
                continue
            safe_left, safe_right = np.maximum(n_left, 1)[:, None], np.maximum(n_right, 1)[:, None]
            d_left = -(g_left / safe_left) / (h_left / safe_left + lam)
            d_right = -(g_right / safe_right) / (h_right / safe_right + lam)
            total = (g_left * d_left + 0.5 * h_left * d_left**2).sum(1)
            total += (g_right * d_right + 0.5 * h_right * d_right**2).sum(1)
            mean = np.where(usable, total / n + self.params.gamma * 2 / n, np.inf)
            t = int(np.argmin(mean))
            if mean[t] < best.mean:
                best = _Candidate(float(mean[t]), f, t, (d_left[t], d_right[t]))
        return best

    def _p_value(self, best: _Candidate, codes: np.ndarray, g: np.ndarray, h: np.ndarray) -> float:
        """The F-test's p-value of the candidate, its variance from the block's records."""
        n = len(codes)
        if n < 2:
            return 1.0
        if best.feature < 0:
            deltas = np.broadcast_to(best.deltas[0], g.shape)
        else:
            left = codes[:, best.feature] <= best.threshold
            deltas = np.where(left[:, None], best.deltas[0], best.deltas[1])
        per_output = _loss_change(g, h, deltas)
        if self.params.diag:
            variance = float(per_output.var(axis=0, ddof=1).sum())
        else:
            variance = float(per_output.sum(axis=1).var(ddof=1))
        if not (variance > 0 and math.isfinite(variance)):
            return 1.0
        return float(fdtrc(1.0, n - 1.0, n * best.mean**2 / variance))

    def _split(self, node: int, best: _Candidate) -> None:
        self.splits += 1
        depth = self.depth[node] + 1
        children = []
        for step in best.deltas:
            child = len(self.feature)
            self.feature.append(-1)
            self.threshold.append(0)
            self.children.append((0, 0))
            self.value.append(self.value[node] + step)
            self.weights.append(self.weights[node].copy())
            self.depth.append(depth)
            self.leaves[child] = _Leaf(block=self._first_block(depth))
            children.append(child)
        self.feature[node], self.threshold[node] = best.feature, best.threshold
        self.children[node] = (children[0], children[1])
        del self.leaves[node]


@dataclass(frozen=True)
class _Candidate:
    """The null candidate (feature -1, one step) or a split (left and right steps)."""

    mean: float
    feature: int
    threshold: int
    deltas: tuple[np.ndarray, ...]


def _loss_change(g: np.ndarray, h: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """Each record's second-order loss change per output, g d + h d^2 / 2."""
    return g * deltas + 0.5 * h * deltas * deltas


def _inputs(codes: np.ndarray) -> np.ndarray:
    """Linear leaves' inputs: bin centres as a fraction of the grid, minus 1/2 (as the library)."""
    return (codes - (BINS - 1) / 2.0) / BINS


@dataclass(frozen=True)
class EnsembleSettings:
    mode: str = "split"  # "split" or "multi"
    full: bool = False  # K outputs (plain softmax) instead of K - 1 beside a reference class
    members: int = 10
    learning_rate: float = 0.3
    seed: int = 0


def run(stream: Any, settings: EnsembleSettings, params: TreeParams) -> dict[str, Any]:
    """Prequential accuracy of the boosted ensemble over `stream` (X, target, classes), and its work."""
    n_classes, n_features = len(stream.classes), stream.X.shape[1]
    low, high = stream.X.min(axis=0), stream.X.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    codes = np.clip(((stream.X - low) / span * BINS).astype(int), 0, BINS - 1)
    outputs = n_classes if settings.full else n_classes - 1
    if settings.mode == "multi":
        members = [[Tree(outputs, n_features, params)] for _ in range(settings.members)]
    else:
        members = [[Tree(1, n_features, params) for _ in range(outputs)] for _ in range(settings.members)]
    weights = np.random.default_rng(settings.seed).poisson(1.0, size=(len(codes), settings.members))
    lr, correct = settings.learning_rate, 0
    start = time.perf_counter()
    for i, row in enumerate(codes):
        inputs, target = _inputs(row), int(stream.target[i])
        leaves = [[tree.route(row) for tree in trees] for trees in members]
        member_out = [
            np.concatenate([tree.predict(leaf, inputs) for tree, leaf in zip(trees, at)])
            for trees, at in zip(members, leaves)
        ]
        scores = lr * np.sum(member_out, axis=0)
        correct += int(np.argmax(scores if settings.full else np.concatenate(([0.0], scores))) == target)
        offset = np.zeros(outputs)
        for m, trees in enumerate(members):
            g, h = _softmax_gradients(offset + member_out[m], target, settings.full)
            g, h = g * weights[i, m], h * weights[i, m]
            if settings.mode == "multi":
                trees[0].learn(leaves[m][0], row, g, h)
            else:
                for k, tree in enumerate(trees):
                    tree.learn(leaves[m][k], row, g[k : k + 1], h[k : k + 1])
            offset = offset + lr * member_out[m]
    trees = [tree for group in members for tree in group]
    return {
        "accuracy": round(100.0 * correct / len(codes), 2),
        "seconds": round(time.perf_counter() - start, 1),
        "trees": len(trees),
        "attempts": sum(t.attempts for t in trees),
        "splits": sum(t.splits for t in trees),
    }


def _softmax_gradients(point: np.ndarray, target: int, full: bool) -> tuple[np.ndarray, np.ndarray]:
    """g and h of the softmax cross-entropy per output (a reference class at score 0 unless `full`)."""
    scores = point if full else np.concatenate(([0.0], point))
    e = np.exp(scores - scores.max())
    p = e / e.sum()
    y = np.arange(p.size) == target
    if not full:
        p, y = p[1:], y[1:]
    return p - y, p * (1.0 - p)


def load(name: str, n: int) -> Any:
    """The stream's first `n` records: a benchmark stream by name, or River's Waveform or LED."""
    if name not in RIVER_STREAMS:
        return materialise(specs([name])[0], n)
    from river.datasets import synth

    generator = (
        synth.Waveform(seed=42)
        if name == "waveform"
        else synth.LEDDrift(seed=42, noise_percentage=0.1, irrelevant_features=True)
    )
    pairs = list(generator.take(n))
    names = list(pairs[0][0])
    classes = sorted({y for _, y in pairs})
    X = np.array([[float(x[k]) for k in names] for x, _ in pairs])
    return SimpleNamespace(X=X, classes=classes, target=np.array([classes.index(y) for _, y in pairs]))


_ENSEMBLE_KEYS = {"full": lambda v: bool(int(v)), "M": int, "lr": float, "seed": int}
_TREE_KEYS = {
    "delta": float,
    "grace": int,
    "start": int,
    "lambda": float,
    "gamma": float,
    "linear": lambda v: bool(int(v)),
    "linear_lambda": float,
    "diag": lambda v: bool(int(v)),
}


def parse_variant(text: str) -> tuple[EnsembleSettings, TreeParams]:
    """``MODE[:key=value...]`` (see the module's docstring) as the ensemble's and the trees' settings."""
    mode, *items = text.split(":")
    if mode not in ("split", "multi"):
        raise ValueError(f"mode must be 'split' or 'multi', got {mode!r}")
    ensemble: dict[str, Any] = {"mode": mode}
    tree: dict[str, Any] = {}
    names = {"M": "members", "lr": "learning_rate", "lambda": "lambda_"}
    for item in items:
        key, _, value = item.partition("=")
        if key in _ENSEMBLE_KEYS:
            ensemble[names.get(key, key)] = _ENSEMBLE_KEYS[key](value)
        elif key in _TREE_KEYS:
            tree[names.get(key, key)] = _TREE_KEYS[key](value)
        else:
            raise ValueError(f"unknown setting {key!r}; choose from {[*_ENSEMBLE_KEYS, *_TREE_KEYS]}")
    return EnsembleSettings(**ensemble), TreeParams(**tree)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stream", default="rbf-5", help=f"a benchmark stream or one of {RIVER_STREAMS}")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("variants", nargs="+", help="MODE[:key=value...]")
    args = parser.parse_args(argv)
    stream = load(args.stream, args.records)
    for text in args.variants:
        result = run(stream, *parse_variant(text))
        print(json.dumps({"stream": args.stream, "records": len(stream.X), "variant": text, **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
