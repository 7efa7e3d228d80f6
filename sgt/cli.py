"""``sgt-evaluate``: prequential (test-then-train) evaluation of an SGT on a CSV or JSON-lines file.

Every record is first predicted by the model as it stands and then learned, one pass over the file, and
the cumulative and recent-window metrics of :class:`sgt.evaluation.Prequential` are reported as one JSON
object on stdout. A progress bar (tqdm's, the ``progress`` extra) goes to stderr when stderr is a
terminal (or with ``--progress``), and ``--plot FILE`` draws the learning curve (needs matplotlib, the
``plot`` extra).

Input formats (chosen by the file extension, or ``--format``):

* **CSV** with a header row. Empty cells are missing values. A column whose first value is a number is
  numeric (a later non-number in it is an error); any other column is nominal and read as strings.
  Columns named with ``--nominal`` are always strings. The target cell is a class label (its text)
  or, for regression, a number; an empty target cell makes an unlabelled record, which is predicted
  but neither learned nor scored.
* **JSON lines**: one object per line, mapping names to numbers, strings or null; a feature keeps the
  type of its first value (``--nominal`` turns numbers into strings). The target key holds any JSON
  scalar label (classification) or a number (regression); null or an absent key makes an unlabelled
  record. Blank lines are skipped.

Any malformed record stops the run with an error that names the file and the line.

Example::

    sgt-evaluate data.csv --target label --task classification --batch-size 1000 --plot curve.png
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sgt.evaluation import Prequential

Row = tuple[int, dict[str, Any], Any]  # (line number, features, target or None)
_CHUNK = 1000  # records between progress updates and learning-curve points when batch size is 1


class InputError(ValueError):
    """A record of the input file cannot be used; the message names the file and the line.

    >>> str(InputError(Path("data.csv"), 12, "expected 3 fields, found 2"))
    'data.csv:12: expected 3 fields, found 2'
    """

    def __init__(self, path: Path, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")


# -- reading ------------------------------------------------------------------------------------------


@dataclass
class _ByteCounter:
    """Decoded lines of a binary file, counting the bytes consumed (the progress bar's position)."""

    path: Path
    stream: IO[bytes]
    consumed: int = 0

    def lines(self) -> Iterator[str]:
        for line, raw in enumerate(self.stream, start=1):
            self.consumed += len(raw)
            try:
                yield raw.decode("utf-8-sig" if line == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise InputError(self.path, line, f"not UTF-8 text: {e}") from None


@dataclass
class _Kinds:
    """Each feature's kind, numeric or nominal, fixed by its first value (the library is as strict).

    In a CSV file a column whose first value is not a number is read as strings throughout; a later
    non-number in a numeric column is an error. In JSON lines the types are explicit, so a string
    where the first value was a number (or the reverse) is an error. ``--nominal`` columns are
    always strings.
    """

    path: Path
    nominal: frozenset[str]
    kinds: dict[str, str] = field(default_factory=dict)

    def _mismatch(self, name: str, line: int, value: Any) -> InputError:
        hint = "name it with --nominal to read all its values as categories"
        first = self.kinds[name]
        return InputError(
            self.path, line, f"feature {name!r} is {first} (its first value) but has {value!r}; {hint}"
        )

    def csv_cell(self, name: str, text: str, line: int) -> float | str | None:
        text = text.strip()
        if not text:
            return None
        if name in self.nominal or self.kinds.get(name) == "nominal":
            return text
        try:
            value = float(text)
        except ValueError:
            if self.kinds.setdefault(name, "nominal") == "numeric":
                raise self._mismatch(name, line, text) from None
            return text
        self.kinds[name] = "numeric"
        return value

    def json_value(self, name: str, value: Any, line: int) -> float | str | None:
        if value is None:
            return None
        if not isinstance(value, (str, bool, int, float)):
            raise InputError(
                self.path, line, f"feature {name!r} must be a number, a string or null, got {value!r}"
            )
        if name in self.nominal:
            return value if isinstance(value, str) else json.dumps(value)
        kind = "nominal" if isinstance(value, str) else "numeric"
        if self.kinds.setdefault(name, kind) != kind:
            raise self._mismatch(name, line, value)
        return value if kind == "nominal" else float(value)


def _regression_target(value: Any, path: Path, line: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(path, line, f"the regression target must be a number, got {value!r}")
    try:
        y = float(value)
    except ValueError:
        raise InputError(path, line, f"the regression target must be a number, got {value!r}") from None
    if not math.isfinite(y):
        raise InputError(path, line, f"the regression target must be finite, got {value!r}")
    return y


def read_csv(
    path: Path, target: str, task: str, nominal: frozenset[str], counter: _ByteCounter
) -> Iterator[Row]:
    """Yield the records of a CSV file with a header row (see the module docstring for the rules)."""
    reader = csv.reader(counter.lines())
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise InputError(path, 1, "the file is empty (a header row is needed)") from None
    if len(set(header)) != len(header):
        raise InputError(path, 1, f"duplicate column names in the header {header}")
    if target not in header:
        raise InputError(path, 1, f"the target column {target!r} is not in the header {header}")
    features = [(i, name) for i, name in enumerate(header) if name != target]
    t, kinds = header.index(target), _Kinds(path, nominal)
    try:
        for cells in reader:
            if not cells:
                continue
            line = reader.line_num
            if len(cells) != len(header):
                raise InputError(path, line, f"expected {len(header)} fields, found {len(cells)}")
            x = {name: kinds.csv_cell(name, cells[i], line) for i, name in features}
            label = cells[t].strip()
            if not label:
                yield line, x, None
            elif task == "regression":
                yield line, x, _regression_target(label, path, line)
            else:
                yield line, x, label
    except csv.Error as e:
        raise InputError(path, reader.line_num, f"malformed CSV: {e}") from None


def read_jsonl(
    path: Path, target: str, task: str, nominal: frozenset[str], counter: _ByteCounter
) -> Iterator[Row]:
    """Yield the records of a JSON-lines file (see the module docstring for the rules)."""
    kinds = _Kinds(path, nominal)
    for line, text in enumerate(counter.lines(), start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise InputError(path, line, f"invalid JSON: {e}") from None
        if not isinstance(obj, dict):
            raise InputError(path, line, f"expected a JSON object, got {type(obj).__name__}")
        y = obj.pop(target, None)
        x = {name: kinds.json_value(name, v, line) for name, v in obj.items()}
        if y is None:
            yield line, x, None
        elif task == "regression":
            yield line, x, _regression_target(y, path, line)
        elif isinstance(y, (dict, list)):
            raise InputError(path, line, f"a class label must be a JSON scalar, got {y!r}")
        else:
            yield line, x, y


def _chunks(rows: Iterable[Row], size: int) -> Iterator[list[Row]]:
    chunk: list[Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# -- evaluation -------------------------------------------------------------------------------------


def _score_regression(metric: Prequential, rows: list[Row], preds: Iterable[float]) -> None:
    pairs = [(y, float(p)) for (_, _, y), p in zip(rows, preds, strict=True) if y is not None]
    metric.update_many([y for y, _ in pairs], [p for _, p in pairs])


class _Refused(Exception):
    """The model raised ValueError on a record that the reader let through."""

    def __init__(self, rows: list[Row], reason: ValueError) -> None:
        super().__init__(str(reason))
        self.line, self.reason = rows[0][0], reason
        self.where = "this record" if len(rows) == 1 else f"a record of lines {rows[0][0]}-{rows[-1][0]}"


def _run_batch(model: Any, metric: Prequential, rows: list[Row]) -> None:
    """Strictly prequential over the batch in one call (``predict_learn_many``)."""
    xs, ys = [x for _, x, _ in rows], [y for _, _, y in rows]
    try:
        out = model.predict_learn_many(xs, ys)
    except ValueError as e:
        raise _Refused(rows, e) from None
    if metric.task == "classification":
        metric.update_proba_many(ys, out, model.classes_)
    else:
        _score_regression(metric, rows, out)


def _run_one_by_one(model: Any, metric: Prequential, rows: list[Row]) -> None:
    """Predict then learn each record in turn (``predict_*_one`` / ``learn_one``)."""
    for row in rows:
        _, x, y = row
        try:
            if metric.task == "classification":
                dist = model.predict_proba_one(x)
                metric.update_proba_many([y], [[dist.get(c, 0.0) for c in model.classes_]], model.classes_)
            else:
                _score_regression(metric, [row], [model.predict_one(x)])
            if y is not None:
                model.learn_one(x, y)
        except ValueError as e:
            raise _Refused([row], e) from None


@dataclass
class _Curve:
    """Learning-curve points: records scored, cumulative error and recent-window error."""

    n: list[int] = field(default_factory=list)
    error: list[float] = field(default_factory=list)
    recent: list[float] = field(default_factory=list)

    def add(self, metric: Prequential) -> None:
        if metric.n and (not self.n or self.n[-1] != metric.n):
            self.n.append(metric.n)
            self.error.append(metric.error)
            self.recent.append(metric.recent_error)


def evaluate(
    path: Path,
    rows: Iterable[Row],
    model: Any,
    metric: Prequential,
    batch_size: int,
    on_chunk: Callable[[Prequential, int], None] | None = None,
) -> tuple[_Curve, int]:
    """Run the prequential loop over ``rows``; return the learning curve and the number of records read.

    ``on_chunk(metric, records_read)`` is called after every batch (every 1,000 records when
    ``batch_size`` is 1), which is where the progress bar updates.
    """
    curve, read = _Curve(), 0
    run = _run_one_by_one if batch_size == 1 else _run_batch
    for chunk in _chunks(rows, _CHUNK if batch_size == 1 else batch_size):
        try:
            run(model, metric, chunk)
        except _Refused as e:
            raise InputError(path, e.line, f"{e.where} was refused by the model: {e.reason}") from None
        read += len(chunk)
        curve.add(metric)
        if on_chunk is not None:
            on_chunk(metric, read)
    return curve, read


# -- progress bar and plot ----------------------------------------------------------------------------


@dataclass
class _ProgressBar:
    """The run's progress on a text stream, drawn by tqdm: share of the file read, time left, records,
    their rate and the recent error."""

    bar: Any  # a tqdm instance over the bytes of the file
    counter: _ByteCounter
    started: float

    @classmethod
    def open(
        cls, tqdm_class: type, stream: IO[str], total_bytes: int, counter: _ByteCounter, started: float
    ) -> _ProgressBar:
        bar = tqdm_class(
            total=total_bytes, file=stream, unit="B", unit_scale=True, unit_divisor=1024, mininterval=0.1
        )
        return cls(bar, counter, started)

    def update(self, metric: Prequential, read: int) -> None:
        rate = read / max(time.perf_counter() - self.started, 1e-9)
        err = "-" if math.isnan(metric.recent_error) else f"{metric.recent_error:.4g}"
        self.bar.set_postfix_str(f"{read:,} records {rate:,.0f}/s recent error {err}", refresh=False)
        self.bar.update(self.counter.consumed - self.bar.n)  # redraws at most every mininterval

    def close(self, metric: Prequential, read: int) -> None:
        self.update(metric, read)
        self.bar.close()  # the final state, then a newline


def _load_tqdm() -> type | None:
    """tqdm's progress bar class, or None when tqdm (the progress extra) is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def _load_figure_class() -> type | None:
    """matplotlib's Figure (no pyplot, no global backend), or None when matplotlib is not installed."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure


def save_plot(figure_class: type, curve: _Curve, metric: Prequential, title: str, out: Path) -> None:
    """Draw the learning curve (cumulative and recent-window error against records) as a PNG."""
    fig = figure_class(figsize=(8, 4.5), dpi=100)
    ax = fig.add_subplot()
    label = "error rate" if metric.task == "classification" else "mean absolute error"
    ax.plot(curve.n, curve.error, label=f"cumulative {label}")
    ax.plot(curve.n, curve.recent, label=f"last {metric.window:,} records", alpha=0.8)
    ax.set_xlabel("records")
    ax.set_ylabel(label)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, format="png")


# -- command line -------------------------------------------------------------------------------------

_HYPERPARAMETERS = {
    "delta": ("delta", float),
    "grace_period": ("grace-period", int),
    "lambda_": ("lambda", float),
    "gamma": ("gamma", float),
    "bins": ("bins", int),
    "warm_up": ("warm-up", int),
    "max_depth": ("max-depth", int),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sgt-evaluate",
        description="Prequential (test-then-train) evaluation of a Stochastic Gradient Tree on a CSV or "
        "JSON-lines file: one pass, every record predicted before it is learned. Prints a JSON summary.",
    )
    p.add_argument("file", type=Path, help="CSV file with a header row, or JSON-lines file (.jsonl, .ndjson)")
    p.add_argument("--target", required=True, help="name of the target column or key")
    p.add_argument("--task", choices=("classification", "regression"), default="classification")
    p.add_argument("--format", choices=("csv", "jsonl"), help="input format (default: from the extension)")
    p.add_argument(
        "--nominal", action="append", default=[], metavar="COLUMN", help="treat as nominal (repeat)"
    )
    for arg, (flag, kind) in _HYPERPARAMETERS.items():
        p.add_argument(f"--{flag}", dest=arg, type=kind, help=f"SGT {arg} (default: the library's)")
    p.add_argument(
        "--batch-size", type=int, default=1000, help="records per predict_learn_many call; 1 = one by one"
    )
    p.add_argument(
        "--window", type=int, default=1000, help="records in the recent-error window (default 1000)"
    )
    p.add_argument(
        "--progress", action="store_true", help="show the progress bar even when stderr is no terminal"
    )
    p.add_argument("--plot", type=Path, metavar="FILE", help="write the learning curve to this PNG file")
    return p


def _input_format(args: argparse.Namespace) -> str:
    if args.format:
        return args.format
    return "jsonl" if args.file.suffix.lower() in (".jsonl", ".ndjson", ".json") else "csv"


def _build_model(args: argparse.Namespace) -> Any:
    from sgt import SGTClassifier, SGTRegressor

    params = {k: getattr(args, k) for k in _HYPERPARAMETERS if getattr(args, k) is not None}
    cls = SGTClassifier if args.task == "classification" else SGTRegressor
    return cls(nominal=tuple(args.nominal), **params)


def _json_number(v: float | int) -> float | int | None:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def summarise(args: argparse.Namespace, model: Any, metric: Prequential, read: int, seconds: float) -> dict:
    """The final report: metrics, tree size and speed (NaN becomes null so that it stays valid JSON)."""
    out: dict[str, Any] = {"file": str(args.file), "task": args.task, "records": read}
    out.update(metric.summary())
    out.update(
        unlabelled=read - metric.n,
        window=metric.window,
        n_nodes=model.n_nodes,
        n_leaves=model.n_leaves,
        depth=model.depth,
        n_splits=model.n_splits,
        seconds=round(seconds, 6),
        records_per_second=round(read / seconds, 1) if seconds > 0 else None,
    )
    return {k: _json_number(v) for k, v in out.items()}


def run(
    args: argparse.Namespace,
    model: Any,
    stderr: IO[str],
    figure_class: type | None = None,
    progress_class: type | None = None,
) -> dict:
    """Evaluate ``model`` as the parsed arguments say; return the summary (InputError on bad records).

    The learning curve is drawn with ``figure_class`` (matplotlib's Figure) when ``args.plot`` is set,
    the progress with ``progress_class`` (tqdm's) when given and ``args.progress`` is set or ``stderr``
    is a terminal.
    """
    metric = Prequential(args.task, args.window)
    reader = read_jsonl if _input_format(args) == "jsonl" else read_csv
    nominal = frozenset(args.nominal)
    with args.file.open("rb") as f:
        counter = _ByteCounter(args.file, f)
        started = time.perf_counter()
        bar = None
        if progress_class is not None and (args.progress or stderr.isatty()):
            bar = _ProgressBar.open(progress_class, stderr, os.fstat(f.fileno()).st_size, counter, started)
        rows = reader(args.file, args.target, args.task, nominal, counter)
        curve, read = evaluate(args.file, rows, model, metric, args.batch_size, bar.update if bar else None)
        seconds = time.perf_counter() - started
        if bar:
            bar.close(metric, read)
    if metric.n == 0:
        raise InputError(args.file, read, f"no record has a value for the target {args.target!r}")
    if args.plot and figure_class is not None:
        save_plot(figure_class, curve, metric, f"{args.file.name}: prequential {args.task}", args.plot)
    return summarise(args, model, metric, read, seconds)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sgt-evaluate`` console script; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error("--batch-size must be >= 1")
    if args.window < 1:
        parser.error("--window must be >= 1")
    if not args.file.is_file():
        parser.error(f"no such file: {args.file}")
    figure_class = _load_figure_class() if args.plot else None
    if args.plot and figure_class is None:
        parser.error("--plot needs matplotlib; install the plot extra: pip install 'sgt-stream[plot]'")
    progress_class = _load_tqdm()  # without it, no bar on a terminal; --progress asks for it
    if args.progress and progress_class is None:
        parser.error("--progress needs tqdm; install the progress extra: pip install 'sgt-stream[progress]'")
    if args.plot and not args.plot.parent.is_dir():  # found now, not after the whole run
        parser.error(f"--plot: no such directory: {args.plot.parent}")
    try:
        model = _build_model(args)
    except ValueError as e:  # bad hyperparameters: the library names the argument and the range
        parser.error(str(e))
    try:
        summary = run(args, model, sys.stderr, figure_class, progress_class)
    except InputError as e:
        print(f"sgt-evaluate: error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary))
    return 0
