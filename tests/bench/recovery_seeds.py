"""Recovery after each drift over several seeds of the models, and its median.

The comparison runs every model once, with one seed, and one run's recovery figure is noisy: the
records a model needs after a drift swing by hundreds to thousands when only the seed of its
randomness (bagging weights, River's ARF's feature subsets) changes, on the same records. This
module runs the models that take a seed (our ensembles, and River's ARF) with each of several seeds
on the same streams, and reports each seed's recovery after each drift and their median, with the
same metric (``tests.bench.metrics.recoveries``) for every model. A recovery that never came counts
as longer than any that did; the median is "never" when at least half the seeds never recovered.

    python -m tests.bench.recovery_seeds --records 20000 --seeds 0,1,2,3,4,5,6,7 \\
        --models ours-boosted,ours-boosted-race,river-arf --streams drift
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tests.bench import ours, peers
from tests.bench.metrics import WINDOW, Predictions, errors, recoveries
from tests.bench.streams import Stream, materialise, specs


def _ours(variant: ours.Variant) -> Callable[[Stream, int], Predictions]:
    def run(stream: Stream, seed: int) -> Predictions:
        model = variant.make(stream.spec)
        reseeded = ours.Variant(
            variant.name, lambda spec: type(model)(**{**model.get_params(), "seed": seed})
        )
        return ours.run_batched(reseeded, stream)

    return run


def _river_arf(stream: Stream, seed: int) -> Predictions:
    from river import forest

    make = forest.ARFRegressor if stream.spec.is_regression else forest.ARFClassifier
    return peers.run_river(make(n_models=10, seed=seed), stream)


#: the models that take a seed: name -> run(stream, seed)
RUNS: dict[str, Callable[[Stream, int], Predictions]] = {
    v.name: _ours(v) for v in ours.VARIANTS if v.name.startswith("ours-boosted")
}
RUNS["river-arf"] = _river_arf


@dataclass(frozen=True)
class SeededRecoveries:
    """One model on one stream: each seed's headline accuracy (or MAE) and recoveries, in seed order."""

    model: str
    seeds: tuple[int, ...]
    headline: tuple[float, ...]
    records: tuple[tuple[int | None, ...], ...]  # [seed][drift]; None: never back (or not measurable)


def median_recovery(records: Sequence[int | None]) -> float | None:
    """The median of the seeds' recoveries, a missing one (None) counting as longer than any; None when
    the median itself is missing."""
    values = np.array([math.inf if r is None else r for r in records], dtype=float)
    middle = float(np.median(values))
    return None if math.isinf(middle) or math.isnan(middle) else middle


def measure(name: str, stream: Stream, seeds: Sequence[int], window: int = WINDOW) -> SeededRecoveries:
    headline, records = [], []
    for seed in seeds:
        err = errors(stream, RUNS[name](stream, seed))
        headline.append(float(err.mean()) if stream.spec.is_regression else 100.0 * (1.0 - float(err.mean())))
        found = recoveries(err, stream.drifts, stream.spec.is_regression, window)
        records.append(tuple(r.records for r in found))
    return SeededRecoveries(name, tuple(seeds), tuple(headline), tuple(records))


def _figure(value: float | None) -> str:
    return "never" if value is None else f"{value:,.0f}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table(stream: Stream, results: Sequence[SeededRecoveries]) -> str:
    """A Markdown table: per model, the mean headline and each drift's median recovery (every seed's)."""
    drifts = [f"drift {i + 1} at {d.position:,}: median (each seed)" for i, d in enumerate(stream.drifts)]
    metric = "MAE" if stream.spec.is_regression else "accuracy %"
    lines = [
        _row([stream.spec.name, f"{metric} (mean)", *drifts]),
        _row(["---", *["---:"] * (1 + len(drifts))]),
    ]
    for result in results:
        cells = [result.model, f"{np.mean(result.headline):.2f}"]
        for j in range(len(drifts)):
            column = [seeded[j] for seeded in result.records]
            cells.append(f"{_figure(median_recovery(column))} ({', '.join(_figure(r) for r in column)})")
        lines.append(_row(cells))
    return "\n".join(lines)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m tests.bench.recovery_seeds", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--records", type=int, help="cap on the records per stream (default: each stream's length)"
    )
    p.add_argument(
        "--streams", default="drift", help="comma-separated stream names or groups (default: drift)"
    )
    p.add_argument("--models", default="ours-boosted,river-arf", help=f"comma-separated, from {sorted(RUNS)}")
    p.add_argument("--seeds", default="0,1,2,3,4,5,6,7", help="comma-separated model seeds")
    p.add_argument(
        "--window", type=int, default=WINDOW, help=f"recent window of the recovery (default {WINDOW})"
    )
    args = p.parse_args(argv)
    args.models = args.models.split(",")
    unknown = sorted(set(args.models) - set(RUNS))
    if unknown:
        p.error(f"--models: unknown {unknown}; choose from {sorted(RUNS)}")
    try:
        args.seeds = [int(s) for s in args.seeds.split(",")]
        args.specs = specs(args.streams.split(","))
    except ValueError as e:
        p.error(str(e))
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    parts = [f"# Recovery over model seeds {args.seeds}, window {args.window:,} records"]
    for spec in args.specs:
        stream = materialise(spec, args.records)
        results = []
        for name in args.models:
            started = time.perf_counter()
            results.append(measure(name, stream, args.seeds, args.window))
            print(f"{spec.name} {name}: {time.perf_counter() - started:,.0f} s", file=sys.stderr, flush=True)
        parts.append(table(stream, results))
    print("\n\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
