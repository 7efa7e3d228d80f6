"""The worker's Kafka-free core, no broker: records/s of decode + process, beside the model alone.

Replays ``--records`` feature records (10 numeric features of the rotating hyperplane, inline labels,
encoded exactly as ``sgt-worker produce`` encodes them) through what ``sgt-worker run`` does to them
between fetch and produce, per run of ``--run`` records of one partition (4 partitions in turn, as a
consumer's batches mostly hold one partition's records): `PartitionState.decode`, then
`PartitionState.process`, which predicts, learns, scores and encodes the predictions. Beside it,
in the same rounds, the same sgt models learn the same rows with ``predict_learn_many`` alone. The
difference is the worker's own per-record cost. No broker, no network: the figures show code changes
without the broker's share of this 2-CPU machine, so an A/B of a change belongs here.

Run from the repository root::

    .venv/bin/python -m tests.bench.bench_worker_core                    # 200,000 records, 3 rounds
    .venv/bin/python -m tests.bench.bench_worker_core --model boosted    # the boosted ensemble
"""

from __future__ import annotations

import argparse
import statistics
import time

import orjson

from worker.config import WorkerSettings, load_settings
from worker.devtools.produce import feature_record
from worker.devtools.streams import RotatingHyperplane
from worker.loop import _tune_gc
from worker.merge import FEATURES
from worker.model import new_model, preload
from worker.state import PartitionState, Record, StateConfig

PARTITIONS = 4


def settings(model: str | None = None) -> WorkerSettings:
    """The settings a worker runs with by default (the model's hyperparameters among them), or with
    ``model`` (``sgt`` or ``boosted``) in place of the default model."""
    return load_settings(
        {
            "bootstrap_servers": "127.0.0.1:9",
            "group_id": "bench",
            "features_topic": "features",
            "predictions_topic": "predictions",
            "dead_letter_topic": "dead",
            "checkpoint_dir": "/nonexistent",
            **({} if model is None else {"model": model}),
        },
        env={},
    )


def stream() -> RotatingHyperplane:
    """The benchmarks' stream: 10 numeric features, gradual drift, binary labels (inline)."""
    return RotatingHyperplane(seed=7, n_features=10)


def encoded_records(n: int) -> list[bytes]:
    """``n`` feature records of `stream` as JSON, as ``sgt-worker produce`` writes them."""
    rows = stream().take(n)
    return [feature_record(f"r-{i:06d}", x, y, 1.7e9 + i / 1000.0) for i, (x, y) in enumerate(rows)]


def runs(n: int, size: int) -> list[tuple[int, range]]:
    """(partition, record indices) of each run: ``size`` records of one partition, partitions in turn."""
    return [((start // size) % PARTITIONS, range(start, min(start + size, n))) for start in range(0, n, size)]


def core(values: list[bytes], size: int, settings: WorkerSettings) -> float:
    """Seconds to decode and process every record through fresh partition states."""
    config = StateConfig("classification", None, features_topic="features")
    states = [PartitionState(p, new_model(settings), config) for p in range(PARTITIONS)]
    offsets = [0] * PARTITIONS
    started = time.perf_counter()
    for p, indices in runs(len(values), size):
        # built as the worker's loop builds them (tuple.__new__, see worker.partition.records_of)
        records = [
            tuple.__new__(Record, (offsets[p] + k, 1.7e9, b"k", values[i])) for k, i in enumerate(indices)
        ]
        offsets[p] += len(records)
        states[p].process(states[p].decode(FEATURES, records), time.time())
    return time.perf_counter() - started


def model_alone(values: list[bytes], size: int, settings: WorkerSettings) -> float:
    """Seconds for the same models to predict and learn the same rows (already decoded) alone."""
    docs = [orjson.loads(v) for v in values]
    xs, ys = [d["x"] for d in docs], [d["y"] for d in docs]
    models = [new_model(settings) for _ in range(PARTITIONS)]
    started = time.perf_counter()
    for p, indices in runs(len(values), size):
        models[p].predict_learn_many(xs[indices.start : indices.stop], ys[indices.start : indices.stop])
    return time.perf_counter() - started


def measure(
    records: int, run: int, rounds: int, chosen: WorkerSettings | None = None
) -> dict[str, list[float]]:
    """Seconds of each round for ``core`` and ``model``, alternating, after the worker's own set-up,
    with the ``chosen`` settings (default: the worker's)."""
    chosen = chosen or settings()
    values = encoded_records(records)
    _tune_gc()  # as the worker does before its loop
    preload()
    seconds: dict[str, list[float]] = {"core": [], "model": []}
    for _ in range(rounds):  # alternate, so that the machine's drift hits both alike
        seconds["core"].append(core(values, run, chosen))
        seconds["model"].append(model_alone(values, run, chosen))
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.bench_worker_core", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--run", type=int, default=2000, help="records per process() call (default 2,000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", choices=("sgt", "boosted"), help="the model (default: the worker's)")
    args = parser.parse_args(argv)
    chosen = settings(args.model)
    seconds = measure(args.records, args.run, args.rounds, chosen)
    rates: dict[str, float] = {}
    print(
        f"{args.records:,} records, runs of {args.run:,} per partition, {args.rounds} rounds, "
        f"model {chosen.model}"
    )
    for name, label in (
        ("model", "sgt predict_learn_many alone"),
        ("core", "worker core (decode + process)"),
    ):
        best, median = min(seconds[name]), statistics.median(seconds[name])
        rates[name] = args.records / median
        print(
            f"{label:<32} median {median:6.2f} s  {args.records / median:>9,.0f} records/s   "
            f"best {best:6.2f} s  {args.records / best:>9,.0f} records/s"
        )
    print(f"the core's records/s are {rates['core'] / rates['model']:.0%} of the model's alone (medians)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
