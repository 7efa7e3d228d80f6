"""A/B of the worker's model alone: CPU time per record of two source trees, in alternating processes.

The machine is shared, so one process per measurement, old and new in turn (the load hits both
alike), each timed with ``time.process_time`` and the figure the median over ``--pairs`` pairs. Each
process runs what bench_worker_core's "model alone" runs: the worker's model (``--model``, the
worker's settings) over ``--records`` records of the worker benchmark's stream (10 numeric features,
binary labels), in batches of ``--batch`` records of one partition, 4 partitions in turn, with
``predict_learn_many``, ``--repeat`` times with fresh models, its fastest run counted (the one the
rest of the machine disturbed least). Each process also reports a digest of every model's
``to_bytes()`` and of every prediction: the two trees must give the same bits (the A/B of a speed
change that keeps the results), and the run fails where they do not.

With ``--stream NAME`` a process runs instead the library's default boosted model of that stream's
task (tests.bench.streams: BoostedClassifier or BoostedRegressor) one record at a time, as a River-style
loop does: ``predict_proba_one`` (classifier) or ``predict_one`` (regressor), then ``learn_one``, over
the stream's first ``--records`` records (``--batch`` and ``--model`` are not used); the model first
learns 300 records on a model of its own, untimed (the compiled kernels loaded), and the digest covers
every prediction and the final ``to_bytes()``.

Run from the repository root, ``--old`` a checkout of the code to compare with (e.g. made by
``git worktree add`` or ``git archive main | tar -x -C DIR``)::

    .venv/bin/python -m tests.bench.bench_model_ab --old DIR                    # boosted, 40,000, 500
    .venv/bin/python -m tests.bench.bench_model_ab --old DIR --batch 2000 --pairs 7
    .venv/bin/python -m tests.bench.bench_model_ab --old DIR --model sgt        # the single tree
    .venv/bin/python -m tests.bench.bench_model_ab --old DIR --stream sea --records 5000 --pairs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from worker.config import MODELS

#: what each process runs, in the source tree whose path is its first argument
_CHILD = """
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
import orjson
from tests.bench import bench_worker_core as bench
from worker.core.sgt_models import new_model, preload

records, batch, model, repeat = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
values = bench.encoded_records(records)
preload()  # the kernels loaded (or compiled) before the clock starts, as the worker does
docs = [orjson.loads(v) for v in values]
xs, ys = [d["x"] for d in docs], [d["y"] for d in docs]
settings = bench.settings(model)
times = []
for _ in range(repeat):  # fresh models each time: the same work
    models = [new_model(settings) for _ in range(bench.PARTITIONS)]
    predictions = []
    started = time.process_time()
    for p, indices in bench.runs(records, batch):
        rows = slice(indices.start, indices.stop)
        predictions.append(models[p].predict_learn_many(xs[rows], ys[rows]))
    times.append(time.process_time() - started)
digest = hashlib.sha256()
for proba in predictions:
    digest.update(proba.tobytes())
for m in models:
    digest.update(m.to_bytes())
print(json.dumps({"seconds": min(times), "digest": digest.hexdigest(), "source": __import__("sgt").__file__}))
"""

#: what each process runs with ``--stream``: the default boosted model one record at a time
_CHILD_ONE = """
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
from tests.bench import streams
from sgt import BoostedClassifier, BoostedRegressor

records, name, repeat = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
spec = streams.specs([name])[0]
stream = streams.materialise(spec, records)
xs = [{k if isinstance(k, str) else f"x{k}": v for k, v in x.items()} for x in stream.dicts]
new_model = BoostedRegressor if spec.is_regression else BoostedClassifier

def run(model, rows):
    predict = model.predict_one if spec.is_regression else model.predict_proba_one
    predictions = []
    for x, y in rows:
        predictions.append(predict(x))
        model.learn_one(x, y)
    return predictions

run(new_model(), list(zip(xs, stream.y))[:300])  # the kernels loaded (or compiled) before the clock starts
times = []
for _ in range(repeat):  # fresh models each time: the same work
    model = new_model()
    started = time.process_time()
    predictions = run(model, zip(xs, stream.y))
    times.append(time.process_time() - started)
digest = hashlib.sha256()
for p in predictions:
    digest.update(repr(p).encode())
digest.update(model.to_bytes())
print(json.dumps({"seconds": min(times), "digest": digest.hexdigest(), "source": __import__("sgt").__file__}))
"""


@dataclass(frozen=True)
class Measurement:
    """One process's CPU seconds, the digest of its models and predictions, and the sgt it imported."""

    seconds: float
    digest: str
    source: str


def measure(
    tree: Path, records: int, batch: int, model: str, repeat: int, stream: str | None = None
) -> Measurement:
    """One process running the model alone from the source tree `tree`, `repeat` times over: its
    fastest time (the one the other processes on the machine disturbed least); with `stream`, that
    stream's default boosted model one record at a time."""
    if stream is None:
        child = [_CHILD, str(tree), str(records), str(batch), model, str(repeat)]
    else:
        child = [_CHILD_ONE, str(tree), str(records), stream, str(repeat)]
    done = subprocess.run(
        [sys.executable, "-c", *child],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return Measurement(float(result["seconds"]), str(result["digest"]), str(result["source"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.bench_model_ab", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--old", type=Path, required=True, help="the source tree to compare with")
    parser.add_argument("--new", type=Path, default=Path("."), help="the source tree measured (default: .)")
    parser.add_argument("--model", choices=MODELS, default="boosted")
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=500, help="records per predict_learn_many (default 500)")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument(
        "--stream", default=None, help="a stream's default boosted model, one record at a time (see above)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per process, the fastest counted (default 3)"
    )
    args = parser.parse_args(argv)
    old, new = args.old.resolve(), args.new.resolve()
    if args.stream is None:
        what = f"{args.model}, {args.records:,} records in batches of {args.batch:,}"
        timed = "predict_learn_many alone"
    else:
        what = f"{args.stream}'s default boosted model, {args.records:,} records one at a time"
        timed = "predict_proba_one or predict_one, then learn_one"
    print(
        f"{what}, {args.pairs} pairs of processes (old then new), CPU time of {timed}, "
        f"the fastest of {args.repeat} runs per process"
    )
    ratios, olds, news = [], [], []
    for pair in range(args.pairs):
        a = measure(old, args.records, args.batch, args.model, args.repeat, args.stream)
        b = measure(new, args.records, args.batch, args.model, args.repeat, args.stream)
        if pair == 0:
            print(f"old: {a.source}\nnew: {b.source}")
        if a.digest != b.digest:
            print(f"the models or predictions differ: old {a.digest[:16]}, new {b.digest[:16]}")
            return 1
        us_old, us_new = a.seconds / args.records * 1e6, b.seconds / args.records * 1e6
        olds.append(us_old)
        news.append(us_new)
        ratios.append(us_new / us_old)
        ratio = us_new / us_old
        print(
            f"pair {pair + 1}: old {us_old:6.2f} us/record  new {us_new:6.2f} us/record  new/old {ratio:.3f}"
        )
    print(
        f"median: old {statistics.median(olds):.2f} us/record, new {statistics.median(news):.2f} us/record, "
        f"new/old per pair {statistics.median(ratios):.3f} (range {min(ratios):.3f} to {max(ratios):.3f}); "
        "identical models and predictions"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
