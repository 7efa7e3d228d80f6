"""Speed and memory of our SGT beside River's SGT, and the prequential runners the experiments use.

* **speed** on hyperplane-10: prequential learn+predict records/s for River's SGT, ours one record at a
  time and ours in batches of 1,000 on the same prefix, and ours in batches on the whole stream (ours:
  the median of three runs, after an untimed warm-up); beside them, ours with the trees' raw softmax
  (``proba="tree"``, the default's cost without its calibration) and with ``proba="mixed"``, one record
  at a time and in batches on the prefix, without a target (both are opt-in);
* **memory**: bytes a numeric feature costs per leaf at 64 bins, ours against River's quantizer.

The side-by-side learning comparison (every model, every stream) is ``tests/bench/comparison.py``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sgt import SGTClassifier, SGTRegressor
from sgt.evaluation import Prequential
from tests.bench.peers import river_sgt
from tests.bench.streams import Stream, StreamSpec, materialise, specs

BATCH = 1000
SPEED_REPEATS = 3  # our speed runs take the median of this many (River's, 10 to 15 s, runs once)


@dataclass(frozen=True)
class Outcome:
    """One model's prequential result on one stream: accuracy in % (or MAE), time and records."""

    value: float
    seconds: float
    n: int
    model: Any = None
    cpu_seconds: float = math.nan  # this process's CPU time over the run (time.process_time)

    @property
    def rate(self) -> float:
        return self.n / self.seconds if self.seconds > 0 else math.nan

    @property
    def cpu_rate(self) -> float:
        """Records per CPU-second: on a machine shared with other jobs, unlike the wall-clock rate,
        it does not depend on how much of a core the process got while it ran."""
        return self.n / self.cpu_seconds if self.cpu_seconds > 0 else math.nan


class _Timer:
    """Wall-clock and CPU time since it was made."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def outcome(self, value: float, n: int, model: Any) -> Outcome:
        return Outcome(value, time.perf_counter() - self.wall, n, model, time.process_time() - self.cpu)


# -- running models -------------------------------------------------------------------------------


def our_model(spec: StreamSpec, **params: Any) -> SGTClassifier | SGTRegressor:
    return SGTRegressor(**params) if spec.is_regression else SGTClassifier(**params)


def _figure(metric: Prequential) -> float:
    return metric.mae if metric.task == "regression" else 100.0 * metric.accuracy


def run_ours(stream: Stream, n: int | None = None, batch: int = BATCH, **params: Any) -> Outcome:
    """Our SGT through ``predict_learn_many`` in batches (strictly prequential).

    The clock covers the model's calls alone: each batch's predictions (with the classes they are in)
    are scored once it stops, as in `run_river`.
    """
    n = len(stream.y) if n is None else n
    model = our_model(stream.spec, **params)
    batches = []
    timer = _Timer()
    for lo in range(0, n, batch):
        out = model.predict_learn_many(
            stream.inputs[lo : min(n, lo + batch)], stream.y[lo : min(n, lo + batch)]
        )
        batches.append((lo, out, None if stream.spec.is_regression else list(model.classes_)))
    outcome = timer.outcome(math.nan, n, model)
    metric = Prequential("regression" if stream.spec.is_regression else "classification")
    for lo, out, classes in batches:
        y = stream.y[lo : lo + len(out)]
        if classes is None:
            metric.update_many(y, out.tolist())
        else:
            metric.update_proba_many(y, out, classes)
    return replace(outcome, value=_figure(metric))


def run_ours_one_by_one(stream: Stream, n: int, **params: Any) -> Outcome:
    """Our SGT one record at a time on the stream's dicts, the records River's models take:
    ``predict_proba_one`` (or ``predict_one``) then ``learn_one``.

    The clock covers the model's calls alone: the predictions are scored once it stops, as in
    `run_river`, so neither side is charged for the benchmark's bookkeeping.
    """
    model = our_model(stream.spec, **params)
    predict = model.predict_one if stream.spec.is_regression else model.predict_proba_one
    predictions = []
    timer = _Timer()
    for x, y in zip(stream.dicts[:n], stream.y[:n], strict=True):
        predictions.append(predict(x))
        model.learn_one(x, y)
    outcome = timer.outcome(math.nan, n, model)
    metric = Prequential("regression" if stream.spec.is_regression else "classification")
    if stream.spec.is_regression:
        metric.update_many(stream.y[:n], predictions)
    else:
        rows = [[proba.get(c, 0.0) for c in model.classes_] for proba in predictions]
        metric.update_proba_many(stream.y[:n], rows, model.classes_)
    return replace(outcome, value=_figure(metric))


def run_river(model: Any, stream: Stream, n: int | None = None) -> Outcome:
    """A River model, one record at a time: ``predict_one`` then ``learn_one``, on the same records.

    The clock covers the model's calls alone: the predictions are scored once it stops.
    """
    n = len(stream.y) if n is None else n
    predictions = []
    timer = _Timer()
    for x, y in zip(stream.dicts[:n], stream.y[:n], strict=True):
        predictions.append(model.predict_one(x))
        model.learn_one(x, y)
    outcome = timer.outcome(math.nan, n, model)
    metric = Prequential("regression" if stream.spec.is_regression else "classification")
    if stream.spec.is_regression:
        predictions = [0.0 if p is None else p for p in predictions]
    metric.update_many(stream.y[:n], predictions)
    return replace(outcome, value=_figure(metric))


# -- speed and memory ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpeedResult:
    river: Outcome  # River's SGT on the prefix
    one_by_one: Outcome  # ours, one record at a time, on the same prefix
    batched_prefix: Outcome  # ours in batches, on the same prefix
    batched: Outcome  # ours in batches, on the whole stream
    mixed_one_by_one: Outcome  # ours with proba="mixed" (opt-in), one record at a time, on the prefix
    mixed_batched_prefix: Outcome  # ours with proba="mixed", in batches, on the prefix
    tree_one_by_one: Outcome  # ours with proba="tree" (opt-in), one record at a time, on the prefix
    tree_batched_prefix: Outcome  # ours with proba="tree", in batches, on the prefix


def speed(limit: int | None, log: Callable[[str], None]) -> SpeedResult:
    """Hyperplane-10: River's SGT and ours on the same prefix (40% of the records), and ours on all of them.

    The ratios compare the three on the same records: River slows down as its tree grows, so a shorter
    prefix for River alone would flatter it.
    """
    spec = specs(["hyperplane-10"])[0]
    stream = materialise(spec, spec.n if limit is None else limit)
    n = len(stream.y)
    prefix = n * 2 // 5
    log(f"speed: hyperplane-10 (River SGT and ours on {prefix:,} records, ours batched on {n:,})")
    # a short untimed run first: the first split attempt imports scipy.special (a few hundred ms,
    # once per process), which would otherwise be charged to whichever timed run came first
    run_ours(stream, min(n, 2_000))
    batched = median_run(lambda: run_ours(stream))
    batched_prefix = median_run(lambda: run_ours(stream, prefix))
    one_by_one = median_run(lambda: run_ours_one_by_one(stream, prefix))
    mixed_batched = median_run(lambda: run_ours(stream, prefix, proba="mixed"))
    mixed_one_by_one = median_run(lambda: run_ours_one_by_one(stream, prefix, proba="mixed"))
    tree_batched = median_run(lambda: run_ours(stream, prefix, proba="tree"))
    tree_one_by_one = median_run(lambda: run_ours_one_by_one(stream, prefix, proba="tree"))
    river = run_river(river_sgt(stream), stream, prefix)  # once: it takes 10 to 15 s
    return SpeedResult(
        river,
        one_by_one,
        batched_prefix,
        batched,
        mixed_one_by_one,
        mixed_batched,
        tree_one_by_one,
        tree_batched,
    )


def median_run(run: Callable[[], Outcome], repeats: int = SPEED_REPEATS) -> Outcome:
    """The run of median time among ``repeats`` (this machine's speed drifts between runs)."""
    outcomes = sorted((run() for _ in range(repeats)), key=lambda o: o.seconds)
    return outcomes[len(outcomes) // 2]


@dataclass(frozen=True)
class MemoryResult:
    ours_per_feature: float  # nbytes a numeric feature adds to a leaf (statistics, pending codes, weight)
    ours_young_per_feature: float  # and to the model while its young naive Bayes has not retired
    ours_stats_per_feature: float  # of which split statistics (from the tree's statistics array)
    river_per_feature: float  # calculate_object_size of a River leaf's quantizer, mean over leaves/features
    river_leaves: int


def _single_leaf_model(X: np.ndarray) -> SGTClassifier:
    # max_depth 0: one leaf, never split, with the default grace period's pending block
    model = SGTClassifier(max_depth=0, bins=64)
    model.learn_many(X, (X[:, 0] > 0.5).astype(int).tolist())
    assert model.n_leaves == 1
    return model


def _split_stats_bytes(model: SGTClassifier) -> float:
    """Bytes of one numeric feature's split statistics in a leaf, read off the tree's statistics array.

    This looks at the library's internals (a leaf slot's ``stats`` array and its column layout), so it is
    a benchmark-only measurement; nan if those internals change.
    """
    try:
        tree = model._trees[0]
        per_column = tree.stats[0].nbytes / tree.layout.n_columns
        return per_column * tree.layout.widths[0]
    except (AttributeError, IndexError):
        return math.nan


def memory(river_model: Any, log: Callable[[str], None]) -> MemoryResult:
    """Our per-feature leaf cost from ``nbytes`` (one-leaf models with 2F and F numeric features)."""
    from river.tree.utils import calculate_object_size

    log("memory: bytes per numeric feature per leaf at 64 bins")
    rng = np.random.default_rng(0)
    X = rng.random((300, 10))
    narrow, wide = _single_leaf_model(X), _single_leaf_model(np.hstack([X, X]))
    # the default's young naive Bayes is the model's, not the leaf's (and only until it retires)
    young = [0 if m._bayes is None else m._bayes.nbytes() for m in (narrow, wide)]
    ours = (wide.nbytes - narrow.nbytes - (young[1] - young[0])) / X.shape[1]
    sizes = [
        calculate_object_size(quantizer)
        for leaf in river_model._root.iter_leaves()
        for quantizer in leaf._split_stats.values()
    ]
    return MemoryResult(
        ours,
        (young[1] - young[0]) / X.shape[1],
        _split_stats_bytes(narrow),
        float(np.mean(sizes)),
        len(sizes) // 10,
    )


# -- printing -------------------------------------------------------------------------------------


def speed_table(s: SpeedResult) -> str:
    """Records/s by the wall clock and per CPU-second; the targets are judged on both."""

    def ratio(o: Outcome, rate: Callable[[Outcome], float]) -> float:
        return rate(o) / rate(s.river)

    def wall(o: Outcome) -> float:
        return o.rate

    def cpu(o: Outcome) -> float:
        return o.cpu_rate

    def verdict(o: Outcome, rate: Callable[[Outcome], float], times: float | None, floor: float) -> str:
        ok = ratio(o, rate) >= times if times is not None else rate(o) >= floor
        return "PASS" if ok else "FAIL"

    rows = [
        ("River SGT", s.river, None, 0.0, ""),
        ("ours, one record at a time", s.one_by_one, 12.0, 0.0, "≥ 12×"),
        (f"ours, batches of {BATCH:,}", s.batched_prefix, 50.0, 0.0, "≥ 50×"),
        (f"ours, batches of {BATCH:,}, whole stream", s.batched, None, 100_000.0, "≥ 100,000/s"),
        ('ours proba="mixed" (opt-in), one record at a time', s.mixed_one_by_one, 10.0, 0.0, ""),
        (f'ours proba="mixed" (opt-in), batches of {BATCH:,}', s.mixed_batched_prefix, 50.0, 0.0, ""),
        ('ours proba="tree" (opt-in), one record at a time', s.tree_one_by_one, 10.0, 0.0, ""),
        (f'ours proba="tree" (opt-in), batches of {BATCH:,}', s.tree_batched_prefix, 50.0, 0.0, ""),
    ]
    lines = [
        "| hyperplane-10 | records | records/s | × River SGT | records per CPU-second | × River SGT (CPU) "
        "| target | wall clock | CPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, o, times, floor, target in rows:
        relative = o is not s.river and times is not None
        cells = [
            label, f"{o.n:,}", f"{o.rate:,.0f}", f"{ratio(o, wall):,.1f}" if relative else "",
            f"{o.cpu_rate:,.0f}", f"{ratio(o, cpu):,.1f}" if relative else "", target,
            verdict(o, wall, times, floor) if target else "", verdict(o, cpu, times, floor) if target else "",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def memory_table(m: MemoryResult) -> str:
    kib = 1024.0

    def row(label: str, size: float, target: bool) -> str:
        verdict = ("PASS" if size <= 3.5 * kib else "FAIL") if target else ""
        return f"| {label} | {size:,.0f} | {size / kib:.2f} | {verdict} |"

    return "\n".join(
        [
            "| bytes per numeric feature per leaf, 64 bins | bytes | KiB | target ≤ 3.5 KiB |",
            "|---|---|---|---|",
            row(
                "ours: split statistics (a leaf's `stats` block for one feature)",
                m.ours_stats_per_feature,
                True,
            ),
            row(
                "ours: all a feature adds to a one-leaf model's `nbytes` (statistics, the pending block's "
                "codes at the default grace period, the linear leaf's weight)",
                m.ours_per_feature,
                True,
            ),
            row(
                "ours: all a feature adds to the model (not to each leaf) while the default's young naive "
                "Bayes has not retired (per-code counts of each class)",
                m.ours_young_per_feature,
                False,
            ),
            row(
                f"River SGT: a leaf's quantizer (mean of {m.river_leaves} leaves)", m.river_per_feature, False
            ),
        ]
    )
