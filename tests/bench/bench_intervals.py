"""Prediction intervals and explanations, measured (BENCHMARKS.md, section 10).

Run from the repository root (not part of pytest; no network; needs the ``bench`` extra for River's
generators and bundled data sets)::

    .venv/bin/python -m tests.bench.bench_intervals                  # 20,000 records a long stream
    .venv/bin/python -m tests.bench.bench_intervals --records 5000   # a quick look

Streams: every regression stream of tests/bench/streams.py (the benchmark, short and robust groups,
at most ``--records`` records each) and ``friedman-drift``, River's FriedmanDrift with two global
gradual drifts (at a third and two thirds of the stream, seed 42). Each regressor (single tree,
boosted ensemble, adaptive tree, default parameters) learns the stream with
``interval_coverages=(0.9, 0.95)`` through
``predict_learn_many``; each record's interval is the one the model had before learning it (the
layer replayed over the prequential predictions, checked equal to the model's own at the end).
Reported per coverage: the coverage over the whole stream, the largest distance from the target over
the windows of 1,000 records after the first 2,000 and how many windows miss it by more than a point,
and the mean width. Then the cost: the same stream learned with the layer off and on (median of three),
and ``explain_one`` per record (mean over 1,000 records of the learned model).

``--moa`` adds MOA's prediction-interval regressors through CapyMOA (``MVE`` and ``AdaPI``, default
base learner, one instance at a time: predict, then train) on ``friedman-1``, ``friedman-drift``,
``trump-approval`` and ``chick-weights``: their coverage and mean width beside ours (about 3 ms a
record each, so ``--records 10000`` keeps it to a few minutes).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from typing import Any

import numpy as np

from sgt import AdaptiveSGTRegressor, BoostedRegressor, SGTRegressor
from sgt.intervals import IntervalLayer
from tests.bench.streams import materialise, specs

COVERAGES = (0.9, 0.95)
MODELS = {"single": SGTRegressor, "boosted": BoostedRegressor, "adaptive": AdaptiveSGTRegressor}
WINDOW, SKIP = 1000, 2000


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
    """Each record's half-width before it was learned, per coverage (the model's layer, replayed)."""
    layer = IntervalLayer(COVERAGES)
    out = {c: np.empty(y.size) for c in COVERAGES}
    for i, (p, t) in enumerate(zip(predictions.tolist(), y.tolist())):
        for c in COVERAGES:
            out[c][i] = layer.half_width(c)
        layer.learn_one(p, t)
    assert layer == model._intervals, "the replay differs from the model's layer"
    return out


def coverage_row(name: str, model: str, y: np.ndarray, p: np.ndarray, q: np.ndarray, c: float) -> str:
    hit = np.abs(y - p) <= q
    windows = [hit[i : i + WINDOW].mean() for i in range(SKIP, y.size - WINDOW + 1, WINDOW)]
    off = [abs(w - c) * 100 for w in windows]
    worst = f"{max(off):.1f}" if off else "-"
    missed = f"{sum(o > 1.0 for o in off)}/{len(off)}" if off else "-"
    width = 2 * float(np.mean(q[np.isfinite(q)]))
    return f"| {name} | {model} | {c:.0%} | {hit.mean() * 100:.1f} | {worst} | {missed} | {width:.3g} |"


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
    args = parser.parse_args()
    data = streams(args.records)
    print(
        "| stream | model | target | coverage % | worst window (points off) | windows > 1 point off | width |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, (X, y) in data.items():
        for label, cls in MODELS.items():
            model = cls(interval_coverages=COVERAGES)
            predictions = model.predict_learn_many(X, y.tolist())
            widths = prequential_half_widths(predictions, y, model)
            for c in COVERAGES:
                print(coverage_row(name, label, y, predictions, widths[c], c))
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
