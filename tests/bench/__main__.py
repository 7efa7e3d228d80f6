"""``python -m tests.bench``: the library benchmark: side-by-side comparison, speed and memory (Markdown).

    python -m tests.bench                          # the full run (every stream and model; about an hour)
    python -m tests.bench --quick                  # smoke run: 2,000 records per stream, 200-record window
    python -m tests.bench --streams short,sea --models 'ours*,river-*,majority'
    python -m tests.bench --streams drift --skip-models 'moa-*' --sections comparison --output drift.md
    python -m tests.bench --streams robust --records 10000   # the robustness suite (tests/bench/stress.py)
    python -m tests.bench --list                   # the streams and models there are
    python -m tests.bench --models 'ours*' --save ours.json          # results also as JSON, to merge:
    python -m tests.bench --merge peers.json,ours.json --output report.md

``make bench`` installs the ``bench`` extra (River, CapyMOA) and runs the full benchmark. MOA's models
run through CapyMOA, which needs a Java runtime (17 or later): ``JAVA_HOME`` if set, else ``java`` on the
``PATH``; without CapyMOA they are left out and the tables say so.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib import metadata

from tests.bench import bench_sgt, comparison, ours, report, saved, streams
from tests.bench.metrics import WINDOW

SECTIONS = ("comparison", "speed", "memory")
QUICK_RECORDS, QUICK_WINDOW = 2_000, 200


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _names(text: str | None) -> list[str] | None:
    return [s.strip() for s in text.split(",") if s.strip()] if text else None


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help=f"smoke run: --records {QUICK_RECORDS}, --window {QUICK_WINDOW}"
    )
    p.add_argument(
        "--records", type=int, help="cap on the records per stream (default: each stream's length)"
    )
    p.add_argument(
        "--streams", help=f"comma-separated stream names or groups {streams.GROUPS} (default: all)"
    )
    p.add_argument("--models", help="comma-separated model names or patterns such as 'ours*' (default: all)")
    p.add_argument("--skip-models", help="comma-separated model names or patterns to leave out")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, from {SECTIONS}")
    p.add_argument("--window", type=int, help=f"recent window of the drift recovery (default {WINDOW})")
    p.add_argument(
        "--loop",
        type=int,
        default=ours.LOOP_PREFIX,
        help=f"records our variants also learn one at a time, for that speed and loop ≡ batch "
        f"(default {ours.LOOP_PREFIX:,})",
    )
    p.add_argument("--output", help="also write the Markdown report to this file")
    p.add_argument("--list", action="store_true", help="list the streams and models, and exit")
    p.add_argument("--save", help="also write the comparison's results as JSON to this file (for --merge)")
    p.add_argument(
        "--merge",
        help="comma-separated JSON files of earlier runs (--save): render them as one; run nothing",
    )
    args = p.parse_args(argv)
    args.sections = _names(args.sections) or []
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        p.error(f"--sections: unknown {sorted(unknown)}; choose from {SECTIONS}")
    if args.quick:
        args.records = QUICK_RECORDS if args.records is None else args.records
        args.window = QUICK_WINDOW if args.window is None else args.window
    args.window = WINDOW if args.window is None else args.window
    if args.records is not None and args.records < 100:
        p.error("--records must be >= 100")
    if args.window < 1:
        p.error("--window must be >= 1")
    if args.loop < 1:
        p.error("--loop must be >= 1")
    try:
        args.specs = streams.specs(_names(args.streams))
        args.selection = comparison.select(_names(args.models), _names(args.skip_models))
    except ValueError as e:
        p.error(str(e))
    return args


def _listing() -> str:
    lines = ["streams:"]
    lines += [f"  {s.name:26} {s.group:10} {s.task:11} {s.n:>7,}" for s in streams.specs()]
    lines += ["models:", *(f"  {name}" for name in comparison.model_names())]
    return "\n".join(lines)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _header(args: argparse.Namespace) -> str:
    import numpy

    limit = "" if args.records is None else f", at most {args.records:,} records per stream"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"# sgt benchmark{limit}\n\n"
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, load average {load}; Python {platform.python_version()}, "
        f"numpy {numpy.__version__}, River {_version('river')}, CapyMOA {_version('capymoa')} "
        f"(JAVA_HOME {os.environ.get('JAVA_HOME', 'unset')}); commit {_commit()}"
    )


def _write(path: str | None, text: str) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.list:
        print(_listing())
        return 0
    started = time.perf_counter()
    parts = [_header(args)]

    def section(results: list[comparison.StreamResult], window_records: int = args.window) -> str:
        drifts = any(r.drifts for r in results)
        window = f"; drift recovery window {window_records:,} records" if drifts else ""
        title = f"## Side by side (prequential, one pass, same records for every model{window})"
        return f"{title}\n\n{report.render(results)}"

    def save_so_far(results: list[comparison.StreamResult]) -> None:  # a long run killed midway keeps these
        _write(args.output, "\n\n".join([*parts, section(results), "(unfinished run)"]) + "\n")
        _write(args.save, saved.dumps(saved.Run(args.window, results)))

    if args.merge:
        runs = []
        for path in _names(args.merge) or []:
            with open(path, encoding="utf-8") as f:
                runs.append(saved.loads(f.read()))
        parts = [f"# sgt benchmark: the comparison of {', '.join(_names(args.merge) or [])}"]
        merged = saved.merge(runs)
        parts.append(section(merged.results, merged.window))
    elif "comparison" in args.sections:
        results = comparison.compare(
            args.specs, args.selection, args.records, _log, args.window, save_so_far, args.loop
        )
        _write(args.save, saved.dumps(saved.Run(args.window, results)))
        parts.append(section(results))
    if not args.merge and ("speed" in args.sections or "memory" in args.sections):
        speed = bench_sgt.speed(args.records, _log)
        if "speed" in args.sections:
            parts.append("## Speed (prequential learn + predict)\n\n" + bench_sgt.speed_table(speed))
        if "memory" in args.sections:
            parts.append("## Memory\n\n" + bench_sgt.memory_table(bench_sgt.memory(speed.river.model, _log)))
    parts.append(
        f"(total {time.perf_counter() - started:,.0f} s; load average at the end {os.getloadavg()[0]:.1f})"
    )
    text = "\n\n".join(parts) + "\n"
    print(text, end="")
    _write(args.output, text)
    return 0


def _commit() -> str:
    """The checked-out commit, with "+changes" when tracked files differ from it ("unknown" outside git)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "sgt"], check=False).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + (" (+ uncommitted changes in sgt/)" if dirty else "")


if __name__ == "__main__":
    sys.exit(main())
