"""The worker's Kafka-free core, no broker: records/s of decode + process, beside the model alone.

Replays ``--records`` feature records (10 numeric features of the rotating hyperplane, inline labels,
or with ``--task regression`` of Friedman #1 with drifting relevant features, encoded exactly as
``sgt-worker produce`` encodes them) through what ``sgt-worker run`` does to them
between fetch and produce, per run of ``--run`` records of one partition (4 partitions in turn, as a
consumer's batches mostly hold one partition's records): `PartitionState.decode`, then
`PartitionState.process`, which predicts, learns, scores and encodes the predictions. Beside it,
in the same rounds, the same sgt models learn the same rows with ``predict_learn_many`` alone. The
difference is the worker's own per-record cost. No broker, no network: the figures show code changes
without the broker's share of this 2-CPU machine, so an A/B of a change belongs here.

Run from the repository root::

    .venv/bin/python -m tests.bench.bench_worker_core                    # 200,000 records, 3 rounds
    .venv/bin/python -m tests.bench.bench_worker_core --model boosted    # the boosted ensemble
    .venv/bin/python -m tests.bench.bench_worker_core --model adaptive   # the tree answering drift
    .venv/bin/python -m tests.bench.bench_worker_core --members 2,3,4,6  # ensembles of each size
    .venv/bin/python -m tests.bench.bench_worker_core --explain 3        # predictions with explain
    .venv/bin/python -m tests.bench.bench_worker_core --task regression  # the regressors

``--members`` measures the boosted ensemble with each number of members (the worker's ``n_members``)
and prints, beside the two rates, the models' prequential accuracy (MAE for regression) on the stream
and the drifts they answered: what a smaller, faster ensemble costs in accuracy.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import numpy as np
import orjson

from worker.config import MODELS, WorkerSettings, load_settings
from worker.core.merge import FEATURES
from worker.core.partition_state import PartitionState, StateConfig
from worker.core.sgt_models import new_model, preload
from worker.core.values import Record
from worker.devtools.produce import feature_record
from worker.devtools.streams import Friedman, RotatingHyperplane, Stream
from worker.kafka.loop import _tune_gc

PARTITIONS = 4


def settings(
    model: str | None = None, n_members: int | None = None, explain: int = 0, task: str = "classification"
) -> WorkerSettings:
    """The settings a worker runs with by default (the model's hyperparameters among them), or with
    ``model`` (one of ``worker.config.MODELS``) in place of the default model and ``n_members`` in
    place of the ensemble's default size, for ``task``."""
    return load_settings(
        {
            "task": task,
            "bootstrap_servers": "127.0.0.1:9",
            "group_id": "bench",
            "features_topic": "features",
            "predictions_topic": "predictions",
            "dead_letter_topic": "dead",
            "checkpoint_dir": "/nonexistent",
            "model": model,
            "n_members": n_members,
            "explain": explain,
        },
        env={},
    )


@dataclass(frozen=True)
class ModelRun:
    """One round of the models alone: its seconds, the models' prequential score over its ``records``
    (the share predicted right before they were learned; for regression the mean absolute error), and
    the drifts they answered (the boosted ensemble's)."""

    seconds: float
    score: float
    records: int
    drifts: int


def stream(task: str = "classification") -> Stream:
    """The benchmarks' stream: 10 numeric features, inline labels; for classification the rotating
    hyperplane (gradual drift, binary labels), for regression Friedman #1 (its relevant features
    change every 40,000 records: `DRIFT_PERIOD`)."""
    return Friedman(seed=7) if task == "regression" else RotatingHyperplane(seed=7, n_features=10)


def encoded_records(n: int, task: str = "classification") -> list[bytes]:
    """``n`` feature records of `stream` as JSON, as ``sgt-worker produce`` writes them."""
    rows = stream(task).take(n)
    return [feature_record(f"r-{i:06d}", x, y, 1.7e9 + i / 1000.0) for i, (x, y) in enumerate(rows)]


def runs(n: int, size: int) -> list[tuple[int, range]]:
    """(partition, record indices) of each run: ``size`` records of one partition, partitions in turn."""
    return [((start // size) % PARTITIONS, range(start, min(start + size, n))) for start in range(0, n, size)]


def core(values: list[bytes], size: int, settings: WorkerSettings) -> float:
    """Seconds to decode and process every record through fresh partition states."""
    config = StateConfig(settings.task, None, features_topic="features")
    states = [PartitionState(p, new_model(settings), config) for p in range(PARTITIONS)]
    offsets = [0] * PARTITIONS
    started = time.perf_counter()
    for p, indices in runs(len(values), size):
        records = [Record(offsets[p] + k, 1.7e9, b"k", values[i]) for k, i in enumerate(indices)]
        offsets[p] += len(records)
        states[p].process(states[p].decode(FEATURES, records), time.time())
    return time.perf_counter() - started


def model_alone(values: list[bytes], size: int, settings: WorkerSettings) -> ModelRun:
    """The same models predicting and learning the same rows (already decoded) alone, timed; their
    predictions are scored after the clock stops."""
    docs = [orjson.loads(v) for v in values]
    xs, ys = [d["x"] for d in docs], [d["y"] for d in docs]
    models = [new_model(settings) for _ in range(PARTITIONS)]
    predicted = []
    started = time.perf_counter()
    for p, indices in runs(len(values), size):
        rows = slice(indices.start, indices.stop)
        predicted.append((p, rows, models[p].predict_learn_many(xs[rows], ys[rows])))
    seconds = time.perf_counter() - started
    drifts = sum(getattr(model, "n_drifts", 0) for model in models)  # the single tree answers none
    if settings.task == "regression":
        error = sum(float(np.abs(value - np.asarray(ys[rows])).sum()) for _, rows, value in predicted)
        return ModelRun(seconds, error / len(docs), len(docs), drifts)
    correct = 0
    for p, rows, proba in predicted:
        # the stream is binary and each partition's first run holds both classes, so every run's columns
        # are the model's final classes
        labels = np.asarray(models[p].classes_)[np.argmax(proba, axis=1)]
        correct += int((labels == np.asarray(ys[rows])).sum())
    return ModelRun(seconds, correct / len(docs), len(docs), drifts)


@dataclass(frozen=True)
class Rounds:
    """Each round's seconds for the core and for the models alone, and the models' prequential score
    (`ModelRun.score`) and drifts answered (the same in every round: the models are deterministic)."""

    core: list[float]
    model: list[float]
    score: float
    drifts: int

    def rate(self, name: str, records: int) -> float:
        """Records/s of ``name`` (``core`` or ``model``) over the median round."""
        return records / statistics.median(getattr(self, name))


def set_up(records: int, task: str = "classification") -> list[bytes]:
    """``records`` encoded records of ``task``, after the worker's own set-up (done once per process)."""
    values = encoded_records(records, task)
    _tune_gc()  # as the worker does before its loop
    preload()
    return values


def measure(records: int, run: int, rounds: int, chosen: WorkerSettings | None = None) -> Rounds:
    """``measure_on`` fresh `set_up` records, with the ``chosen`` settings (default: the worker's)."""
    chosen = chosen or settings()
    return measure_on(set_up(records, chosen.task), run, rounds, chosen)


def measure_on(values: list[bytes], run: int, rounds: int, chosen: WorkerSettings) -> Rounds:
    """``core`` and ``model_alone`` on ``values`` for ``rounds`` rounds, alternating, with ``chosen``."""
    core_seconds, model_runs = [], []
    for _ in range(rounds):  # alternate, so that the machine's drift hits both alike
        core_seconds.append(core(values, run, chosen))
        model_runs.append(model_alone(values, run, chosen))
    last = model_runs[-1]
    return Rounds(core_seconds, [m.seconds for m in model_runs], last.score, last.drifts)


def _score_name(task: str) -> str:
    """What the prequential score of ``task`` is: an MAE or an accuracy."""
    return "MAE" if task == "regression" else "accuracy"


def _scored(score: float, task: str) -> str:
    """A prequential score as printed: an accuracy in percent, or an MAE."""
    return f"{score:.3f}" if task == "regression" else f"{score:.2%}"


def report(rounds: Rounds, records: int, task: str = "classification") -> None:
    """Each rate's median and best round, their ratio, and the models' prequential score."""
    for name, label in (
        ("model", "sgt predict_learn_many alone"),
        ("core", "worker core (decode + process)"),
    ):
        seconds = getattr(rounds, name)
        best, median = min(seconds), statistics.median(seconds)
        print(
            f"{label:<32} median {median:6.2f} s  {records / median:>9,.0f} records/s   "
            f"best {best:6.2f} s  {records / best:>9,.0f} records/s"
        )
    ratio = rounds.rate("core", records) / rounds.rate("model", records)
    print(f"the core's records/s are {ratio:.0%} of the model's alone (medians)")
    print(f"the models' prequential {_score_name(task)}: {_scored(rounds.score, task)}")


def report_sizes(
    members: list[int], records: int, run: int, rounds: int, task: str = "classification"
) -> None:
    """The boosted ensemble with each number of members: both rates (medians), the accuracy (MAE) and
    the drifts answered."""
    score = _score_name(task)
    print(f"{'members':>7}  {'model records/s':>15}  {'core records/s':>14}  {score:>8}  {'drifts':>6}")
    values = set_up(records, task)  # the same records for every size
    for size in members:
        measured = measure_on(values, run, rounds, settings("boosted", size, task=task))
        model_rate, core_rate = measured.rate("model", records), measured.rate("core", records)
        rates = f"{model_rate:>15,.0f}  {core_rate:>14,.0f}"
        print(f"{size:>7}  {rates}  {_scored(measured.score, task):>8}  {measured.drifts:>6}", flush=True)


def _sizes(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(",")]
    if any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError("member counts are positive integers")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.bench_worker_core", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--run", type=int, default=2000, help="records per process() call (default 2,000)")
    parser.add_argument("--rounds", type=int, default=3)
    chosen_model = parser.add_mutually_exclusive_group()
    chosen_model.add_argument("--model", choices=MODELS, help="the model (default: the worker's)")
    chosen_model.add_argument(
        "--members", type=_sizes, help="comma-separated member counts: the boosted ensemble with each"
    )
    parser.add_argument(
        "--explain", type=int, default=0, help="the worker's explain setting (default 0: off)"
    )
    parser.add_argument(
        "--task",
        choices=("classification", "regression"),
        default="classification",
        help="the worker's task, and the stream's (default: classification)",
    )
    args = parser.parse_args(argv)
    head = f"{args.records:,} records, runs of {args.run:,} per partition, {args.rounds} rounds, {args.task}"
    if args.members:
        print(f"{head}, boosted")
        report_sizes(args.members, args.records, args.run, args.rounds, args.task)
        return 0
    chosen = settings(args.model, explain=args.explain, task=args.task)
    print(f"{head}, model {chosen.partition_model}")
    report(measure(args.records, args.run, args.rounds, chosen), args.records, args.task)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
