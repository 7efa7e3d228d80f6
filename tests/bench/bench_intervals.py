"""Prediction intervals and explanations, measured (BENCHMARKS.md, section 10).

Run from the repository root (not part of pytest; no network; needs the ``bench`` extra for River's
generators and bundled data sets)::

    .venv/bin/python -m tests.bench.bench_intervals                  # 20,000 records a long stream
    .venv/bin/python -m tests.bench.bench_intervals --variants       # and the rules measured against it
    .venv/bin/python -m tests.bench.bench_intervals --records 5000   # a quick look

Streams: every regression stream of tests/bench/streams.py (the benchmark, short and robust groups,
at most ``--records`` records each) and ``friedman-drift``, River's FriedmanDrift with two global
gradual drifts (at a third and two thirds of the stream, seed 42). Each regressor (single tree,
boosted ensemble, adaptive tree, default parameters) learns the stream with
``interval_coverages=(0.9, 0.95)`` through ``predict_learn_many``; each record's interval is the one
the model had before learning it (the layer replayed over the prequential predictions, checked equal
to the model's own at the end). A cell is: the coverage % over the whole stream / the largest distance
in points from the target over the windows of 1,000 records after the first 2,000 ("-": none) / the
mean width; a row ends with the range of its widths over the previous rule's (format 1's absolute
half-width, replayed); the last line counts the cells more than a point off the target, over the
stream or in a window. Then the cost: the same stream learned with the layer off and on (median of
three), and ``explain_one`` per record (mean over 1,000 records of the learned model).

``--variants`` replays other rules over the same predictions (conformal PID's integrator added to the
previous rule, adaptive conformal inference over a window of residuals, multiplicative quantile
tracking, the layer with one constant changed or without its young step and scale rate): cells
missing, worst distances, width over the layer's.

``--moa`` adds MOA's prediction-interval regressors through CapyMOA (``MVE`` and ``AdaPI``, default
base learner, one instance at a time: predict, then train) on ``friedman-1``, ``friedman-drift``,
``trump-approval`` and ``chick-weights``: their coverage and mean width beside ours (about 3 ms a
record each, so ``--records 10000`` keeps it to a few minutes).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sgt import AdaptiveSGTRegressor, BoostedRegressor, SGTRegressor
from sgt.intervals import (
    SCALE_CLIP,
    SCALE_RATE,
    STEP,
    YOUNG_RATE,
    YOUNG_STEP,
    YOUNG_STEP_CAP,
    IntervalLayer,
    initial_level,
)
from tests.bench.streams import materialise, specs

COVERAGES = (0.9, 0.95)
MODELS = {"single": SGTRegressor, "boosted": BoostedRegressor, "adaptive": AdaptiveSGTRegressor}
WINDOW, SKIP = 1000, 2000
TARGET_POINTS = 1.0  # the target: coverage within a point, whole stream and every window

#: a rule: (prequential predictions, targets, coverage) -> each record's half-width before learning it
Rule = Callable[[np.ndarray, np.ndarray, float], np.ndarray]


def _friedman_drift(n: int) -> tuple[np.ndarray, np.ndarray]:
    from river.datasets import synth

    stream = synth.FriedmanDrift(drift_type="gra", position=(n // 3, 2 * n // 3), seed=42)
    pairs = list(itertools.islice(stream, n))
    return np.array([list(x.values()) for x, _ in pairs]), np.array([float(t) for _, t in pairs])


def streams(records: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for spec in [s for s in specs() if s.is_regression]:
        stream = materialise(spec, records)
        out[spec.name] = (stream.X, np.asarray(stream.target, dtype=float))
    out["friedman-drift"] = _friedman_drift(records)
    return out


def prequential_half_widths(predictions: np.ndarray, y: np.ndarray, model: Any) -> dict[float, np.ndarray]:
    """Each record's half-width before it was learned, per coverage (the model's layer, replayed; with
    a model, checked equal to its layer at the end)."""
    layer = IntervalLayer(COVERAGES)
    out = {c: np.empty(y.size) for c in COVERAGES}
    for i, (p, t) in enumerate(zip(predictions.tolist(), y.tolist())):
        for c in COVERAGES:
            out[c][i] = layer.half_width(c)
        layer.learn_one(p, t)
    assert model is None or layer == model._intervals, "the replay differs from the model's layer"
    return out


@dataclass(frozen=True)
class Cell:
    """One stream, model and coverage: coverage % over the stream, the largest distance in points from
    the target over the windows of WINDOW records after SKIP, and the mean width of the finite intervals."""

    coverage: float
    worst: float | None
    width: float
    target: float

    @classmethod
    def of(cls, y: np.ndarray, p: np.ndarray, q: np.ndarray, c: float) -> Cell:
        hit = np.abs(y - p) <= q
        windows = [hit[i : i + WINDOW].mean() for i in range(SKIP, y.size - WINDOW + 1, WINDOW)]
        worst = max(abs(w - c) * 100 for w in windows) if windows else None
        return cls(float(hit.mean()) * 100, worst, 2 * float(np.mean(q[np.isfinite(q)])), c * 100)

    @property
    def misses(self) -> bool:
        """Off the target by more than TARGET_POINTS, over the stream or in a window."""
        return abs(self.coverage - self.target) > TARGET_POINTS or (self.worst or 0.0) > TARGET_POINTS

    def __str__(self) -> str:
        worst = "-" if self.worst is None else f"{self.worst:.1f}"
        return f"{self.coverage:.1f} / {worst} / {self.width:.3g}"


# -- the rules measured against the layer (BENCHMARKS.md, section 10): replays on the same predictions --


def previous_rule(p: np.ndarray, y: np.ndarray, c: float) -> np.ndarray:
    """Format 1's layer: an absolute half-width from 0, step 0.2 times the running mean residual."""
    return _absolute(p, y, c, gain=0.0)


def pid_rule(gain: float, saturation: float = 0.3) -> Rule:
    """The previous rule plus conformal PID's integrator, gain * s * tan(E_t log t / (t saturation)) on
    the cumulative coverage error E_t (C_sat 0.3 the best of 0.1, 0.3 and 1; of the gains 1, 2, 5, 10
    and 20, 5 the least that brings ChickWeights within a point, 20 the least that brings every cell)."""

    def rule(p: np.ndarray, y: np.ndarray, c: float) -> np.ndarray:
        return _absolute(p, y, c, gain=gain, saturation=saturation)

    return rule


def _absolute(p: np.ndarray, y: np.ndarray, c: float, gain: float, saturation: float = 1.0) -> np.ndarray:
    out, q, s, error = np.empty(y.size), 0.0, 0.0, 0.0
    for i, (prediction, target) in enumerate(zip(p.tolist(), y.tolist())):
        published = math.inf
        if i:
            angle = error * math.log(i + 1) / ((i + 1) * saturation)
            bent = math.copysign(math.inf, error) if abs(angle) >= math.pi / 2 else math.tan(angle)
            published = max(0.0, q + gain * s * bent) if gain else q
        out[i] = published
        r = abs(target - prediction)
        error += (r > published) - (1 - c)
        step = 0.2 * (r if i == 0 else s)
        q = max(0.0, q + step * (c if r > q else c - 1.0))
        s += max(1.0 / (i + 1), 0.01) * (r - s)
    return out


def aci_rule(p: np.ndarray, y: np.ndarray, c: float, gamma: float = 0.01, window: int = 1000) -> np.ndarray:
    """Adaptive conformal inference (Gibbs and Candès 2021): the level 1 - alpha_t adapted by gamma,
    the half-width the conformal quantile at that level of the last `window` residuals."""
    out, alpha, recent, ordered = np.empty(y.size), 1 - c, deque[float](), list[float]()
    for i, (prediction, target) in enumerate(zip(p.tolist(), y.tolist())):
        rank = math.ceil((1 - alpha) * (len(ordered) + 1)) - 1
        out[i] = 0.0 if alpha >= 1 else (ordered[rank] if 0 <= rank < len(ordered) else math.inf)
        r = abs(target - prediction)
        alpha += gamma * ((1 - c) - (r > out[i]))
        recent.append(r)
        bisect.insort(ordered, r)
        if len(recent) > window:
            del ordered[bisect.bisect_left(ordered, recent.popleft())]
    return out


def multiplicative_rule(p: np.ndarray, y: np.ndarray, c: float, eta: float = 0.2) -> np.ndarray:
    """Quantile tracking in log space: q <- q exp(eta (miss - alpha)), from the first residual."""
    out, q = np.empty(y.size), math.nan
    for i, (prediction, target) in enumerate(zip(p.tolist(), y.tolist())):
        out[i] = math.inf if i == 0 else q
        r = abs(target - prediction)
        q = max(r, 1e-12) if i == 0 else q * math.exp(eta * ((r > q) - (1 - c)))
    return out


def layer_rule(
    step: float = STEP,
    rate: float = SCALE_RATE,
    clip: float = SCALE_CLIP,
    start: float | None = None,
    young: tuple[float, float, float] = (YOUNG_STEP, YOUNG_STEP_CAP, YOUNG_RATE),
    gain: float = 0.0,
) -> Rule:
    """The layer's rule with its constants changed (`start`: the levels' first value, else the
    Gaussian level; `young`: YOUNG_STEP, YOUNG_STEP_CAP and YOUNG_RATE, (0, 0, 0) for none); with none
    changed, the layer itself (checked in `variant_rows`). `gain` adds conformal PID's integrator,
    gain * tan(E log n / (0.3 n)) on the cumulative coverage error E, to the published level."""
    young_step, cap, young_rate = young

    def rule(p: np.ndarray, y: np.ndarray, c: float) -> np.ndarray:
        out, s, error = np.empty(y.size), 0.0, 0.0
        level = initial_level(c) if start is None else start
        for i, (prediction, target) in enumerate(zip(p.tolist(), y.tolist())):
            published = level + gain * _bent(error, i + 1) if gain and i else level
            out[i] = max(0.0, published) * s if i else math.inf
            r = abs(target - prediction)
            if i:
                error += (r > out[i]) - (1 - c)
                stepped = max(step, min(cap, young_step / math.sqrt(i)))
                level = max(0.0, level + stepped * (c if r > level * s else c - 1.0))
            scale_rate = max(1.0 / (i + 1), rate, young_rate / math.sqrt(i + 1))
            s += scale_rate * ((min(r, clip * s) if s > 0.0 else r) - s)
        return out

    return rule


def _bent(error: float, t: int, saturation: float = 0.3) -> float:
    """Conformal PID's saturated integrator tan(E log t / (t C_sat)), capped at +-100 levels."""
    angle = error * math.log(t) / (t * saturation)
    return (
        math.copysign(100.0, error) if abs(angle) >= math.pi / 2 else max(-100.0, min(100.0, math.tan(angle)))
    )


VARIANTS: dict[str, Rule] = {
    "the previous rule (format 1)": previous_rule,
    "previous + PID integrator, K_I 20": pid_rule(20.0),
    "ACI, 1,000 residuals, gamma 0.01": aci_rule,
    "multiplicative, eta 0.2": multiplicative_rule,
    "layer, levels from 0": layer_rule(start=0.0),
    "layer, scale not clipped": layer_rule(clip=math.inf),
    "layer, not young (step 0.3, scale rate max(1/n, 0.01))": layer_rule(young=(0.0, 0.0, 0.0)),
    "layer, young step not capped": layer_rule(young=(YOUNG_STEP, math.inf, YOUNG_RATE)),
    "layer + PID integrator, K_I 1": layer_rule(gain=1.0),
}


def variant_rows(runs: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]) -> None:
    """Each rule over every stream, model and coverage: cells off by more than a point, the worst
    distance over a stream and over a window, and its width over the layer's (geometric mean, range)."""
    chosen = layer_rule()
    p, y = runs["friedman-1", "single"]
    assert np.array_equal(chosen(p, y, 0.9), prequential_half_widths(p, y, None)[0.9]), "not the layer"
    print("\n| rule | cells missing | worst stream (points) | worst window | width / the layer's |")
    print("|---|---|---|---|---|")
    for name, rule in VARIANTS.items():
        cells, ratios = [], []
        for p, y in runs.values():
            for c in COVERAGES:
                cell, mine = Cell.of(y, p, rule(p, y, c), c), Cell.of(y, p, chosen(p, y, c), c)
                cells.append(cell)
                ratios.append(cell.width / mine.width)
        stream = max(abs(cell.coverage - cell.target) for cell in cells)
        window = max(cell.worst or 0.0 for cell in cells)
        mean = math.exp(statistics.fmean(math.log(r) for r in ratios))
        missing = sum(cell.misses for cell in cells)
        print(
            f"| {name} | {missing} of {len(cells)} | {stream:.1f} | {window:.1f} | "
            f"{mean:.2f} ({min(ratios):.2f} to {max(ratios):.2f}) |"
        )


MOA_STREAMS = ("friedman-1", "friedman-drift", "trump-approval", "chick-weights")


def moa_rows(data: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Coverage and mean width of MOA's interval regressors, prequentially, on `MOA_STREAMS`."""
    import capymoa.uncertainty as uncertainty
    from capymoa.stream import NumpyStream

    print("\n| stream | MOA learner | target | coverage % | mean width |")
    print("|---|---|---|---|---|")
    for name in MOA_STREAMS:
        X, y = data[name]
        for learner in ("MVE", "AdaPI"):
            for c in COVERAGES:
                stream = NumpyStream(X, y, target_type="numeric")
                model = getattr(uncertainty, learner)(schema=stream.get_schema(), confidence_level=c)
                bounds = np.zeros((y.size, 2))
                for i in range(y.size):
                    instance = stream.next_instance()
                    low, _, high = model.predict(instance)
                    bounds[i] = low, high
                    model.train(instance)
                hit = (bounds[:, 0] <= y) & (y <= bounds[:, 1])
                width = float(np.mean(bounds[:, 1] - bounds[:, 0]))
                print(f"| {name} | {learner} | {c:.0%} | {hit.mean() * 100:.1f} | {width:.3g} |")


def timed(make: Any, X: np.ndarray, y: list[float]) -> float:
    runs = []
    for _ in range(3):
        model = make()
        start = time.perf_counter()
        model.predict_learn_many(X, y)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000, help="records of a long stream")
    parser.add_argument("--moa", action="store_true", help="add MOA's MVE and AdaPI (through CapyMOA)")
    parser.add_argument("--variants", action="store_true", help="add the rules measured against the layer")
    args = parser.parse_args()
    data = streams(args.records)
    header = " | ".join(f"{label}, {c:.0%}" for label in MODELS for c in COVERAGES)
    print(f"| stream (records) | {header} | width / the previous rule's |")
    print("|---" * (2 + len(MODELS) * len(COVERAGES)) + "|")
    runs: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    missing = total = 0
    for name, (X, y) in data.items():
        cells, ratios = [], []
        for label, cls in MODELS.items():
            model = cls(interval_coverages=COVERAGES)
            predictions = model.predict_learn_many(X, y.tolist())
            runs[name, label] = predictions, y
            widths = prequential_half_widths(predictions, y, model)
            for c in COVERAGES:
                cell = Cell.of(y, predictions, widths[c], c)
                cells.append(cell)
                ratios.append(cell.width / Cell.of(y, predictions, previous_rule(predictions, y, c), c).width)
        missing, total = missing + sum(cell.misses for cell in cells), total + len(cells)
        row = " | ".join(str(cell) for cell in cells)
        print(f"| {name} ({y.size:,}) | {row} | {min(ratios):.2f} to {max(ratios):.2f} |")
    print(f"\ncells off the target by more than {TARGET_POINTS:g} point: {missing} of {total}")
    if args.variants:
        variant_rows(runs)
    X, y = data["friedman-1"]
    print(f"\n| model | learn, intervals off (s) | on (s) | explain_one (µs/record) |  ({y.size} records)")
    print("|---|---|---|---|")
    records = [dict(zip([f"x{j}" for j in range(X.shape[1])], row)) for row in X[:1000].tolist()]
    for label, cls in MODELS.items():
        off = timed(cls, X, y.tolist())
        on = timed(lambda cls=cls: cls(interval_coverages=COVERAGES), X, y.tolist())
        model = cls()
        model.learn_many(X, y.tolist())
        start = time.perf_counter()
        for record in records:
            model.explain_one(record)
        explain = (time.perf_counter() - start) / len(records) * 1e6
        print(f"| {label} | {off:.2f} | {on:.2f} | {explain:.0f} |")
    if args.moa:
        moa_rows(data)


if __name__ == "__main__":
    main()
