"""The memory budget (`max_bytes`, the worker's ``model_max_bytes``) on a long drifting stream.

Run from the repository root (not part of pytest; no network)::

    .venv/bin/python -m tests.bench.bench_budget                          # 10 million records
    .venv/bin/python -m tests.bench.bench_budget --records 1000000        # a shorter look
    .venv/bin/python -m tests.bench.bench_budget --models sgt --budgets none,1MiB

The stream is the worker's SEA (`worker.devtools.streams.SEA`: three features uniform on [0, 10],
10% label noise, the concept's threshold changing every ``--period`` records, 50,000 by default). Each
model is the one the worker starts for classification (`worker.core.sgt_models.new_model`, default settings)
with ``model_max_bytes`` set to each of ``--budgets`` ("none" is unbounded), and learns the stream in
batches of ``--batch`` records with ``predict_learn_many`` (each row predicted before it is learned).

Printed for every model and budget: the prequential accuracy over the whole stream and over its last
million records, the model's bytes (`nbytes`, what ``sgt_model_bytes`` reports) at the end and the
largest seen after any batch, nodes, inactive leaves, and records per CPU-second (this process's CPU
time, which other jobs on a shared machine do not change). Progress goes to stderr every million
records. Exits 1 if a bounded model's bytes ever exceeded its budget.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np

from worker.config import load_settings
from worker.config.worker_settings import WorkerSettings
from worker.core.sgt_models import new_model
from worker.devtools.streams import SEA

MODELS = ("sgt", "boosted")
UNITS = {"kib": 1024, "mib": 1024 * 1024, "gib": 1024 * 1024 * 1024}


@dataclass(frozen=True)
class Result:
    """One model's run under one budget."""

    model: str
    budget: int | None
    records: int
    accuracy: float  # prequential, %, whole stream
    last_accuracy: float  # prequential, %, the last million records (or the whole, if shorter)
    nbytes: int
    max_nbytes: int
    nodes: int
    inactive: int
    cpu_seconds: float  # this process's CPU time over the run (the machine may be shared)


def parse_budget(text: str) -> int | None:
    """ "none", a number of bytes, or a number with KiB, MiB or GiB."""
    text = text.strip().lower()
    if text == "none":
        return None
    for unit, factor in UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def settings_for(model_name: str, budget: int | None) -> WorkerSettings:
    """The worker's settings of the model with `budget` (None: unbounded, the setting's "none"; a None
    value would leave the setting at its default, 32 MiB)."""
    return load_settings(
        {"model": model_name, "model_max_bytes": "none" if budget is None else budget}, env={}
    )


def run(model_name: str, budget: int | None, records: int, period: int, batch: int) -> Result:
    """Learn the stream prequentially with one model and budget."""
    model = new_model(settings_for(model_name, budget))
    stream = SEA(period=period)
    hits, last_hits, most = 0, 0, 0
    last_from = max(0, records - 1_000_000)
    started = time.process_time()
    for start in range(0, records, batch):
        X, y = stream.batch(min(batch, records - start), start)
        proba = model.predict_learn_many(X, y.tolist())
        right = np.asarray(model.classes_)[proba.argmax(axis=1)] == y
        hits += int(right.sum())
        last_hits += int(right[max(0, last_from - start) :].sum())
        most = max(most, model.nbytes)
        end = start + len(y)
        if end % 1_000_000 == 0:
            print(
                f"{model_name} budget={budget} {end:,} records: {model.nbytes:,} bytes, "
                f"{model.n_nodes} nodes, accuracy {100 * hits / end:.2f}%, "
                f"{time.process_time() - started:.0f} CPU s",
                file=sys.stderr,
                flush=True,
            )
    inactive = int(getattr(model, "n_inactive", 0))
    return Result(
        model_name,
        budget,
        records,
        100 * hits / records,
        100 * last_hits / (records - last_from),
        model.nbytes,
        most,
        model.n_nodes,
        inactive,
        time.process_time() - started,
    )


def table(results: list[Result]) -> str:
    """The results as a Markdown table."""
    lines = [
        "| model | records | budget | accuracy | last 1M | bytes at the end | most bytes | nodes "
        "| inactive leaves | records per CPU-second |",
        "|---|---:|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        budget = "none" if r.budget is None else f"{r.budget:,} bytes"
        if r.budget is not None and r.budget % (1024 * 1024) == 0:
            budget = f"{r.budget // (1024 * 1024)} MiB"
        lines.append(
            f"| {r.model} | {r.records:,} | {budget} | {r.accuracy:.2f}% | {r.last_accuracy:.2f}% "
            f"| {r.nbytes:,} | {r.max_nbytes:,} | {r.nodes:,} | {r.inactive:,} "
            f"| {r.records / r.cpu_seconds:,.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.bench.bench_budget", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--records", type=int, default=10_000_000, help="records of the stream (default 10 million)"
    )
    p.add_argument("--period", type=int, default=50_000, help="records per concept (default 50,000)")
    p.add_argument("--batch", type=int, default=5_000, help="records per predict_learn_many call")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {MODELS}")
    p.add_argument(
        "--budgets",
        default="none,32MiB,2MiB,1MiB",
        help="comma-separated model_max_bytes values: none, bytes, or with KiB / MiB / GiB",
    )
    args = p.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not set(models) <= set(MODELS):
        p.error(f"--models: choose from {MODELS}")
    if args.records < 1 or args.period < 1 or args.batch < 1:
        p.error("--records, --period and --batch must be >= 1")
    budgets = [parse_budget(b) for b in args.budgets.split(",") if b.strip()]
    results = [run(m, b, args.records, args.period, args.batch) for m in models for b in budgets]
    print(table(results))
    over = [r for r in results if r.budget is not None and r.max_nbytes > r.budget]
    for r in over:
        print(
            f"FAILED: {r.model} took {r.max_nbytes:,} bytes, over its budget of {r.budget:,}", file=sys.stderr
        )
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
