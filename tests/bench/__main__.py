"""``python -m tests.bench``: run the library benchmark and print its tables (Markdown) side by side.

python -m tests.bench                 # the full run recorded in BENCHMARKS.md (about 10 minutes)
python -m tests.bench --quick         # a short smoke run (5,000 records per stream)
python -m tests.bench --streams sea,rbf-5 --sections accuracy
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime

from tests.bench import bench_sgt

SECTIONS = ("accuracy", "speed", "memory")


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="short smoke run (--records 5000)")
    p.add_argument(
        "--records", type=int, help="cap on the records per stream (default: each stream's length)"
    )
    p.add_argument("--streams", help="comma-separated stream names (default: all)")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, from {SECTIONS}")
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        p.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    args.streams = [s.strip() for s in args.streams.split(",")] if args.streams else None
    if args.quick and args.records is None:
        args.records = 5_000
    if args.records is not None and args.records < 100:
        p.error("--records must be >= 100")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    import numpy
    import river

    started = time.perf_counter()
    limit = "" if args.records is None else f" (at most {args.records:,} records per stream)"
    print(f"# sgt benchmark{limit}\n")
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores; Python {platform.python_version()}, numpy {numpy.__version__}, "
        f"River {river.__version__}; CapyMOA {'installed' if _has_capymoa() else 'not installed'}; "
        f"commit {_commit()}\n"
    )
    if "accuracy" in args.sections:
        rows = bench_sgt.accuracy(args.streams, args.records, _log)
        print("## Accuracy (prequential, one pass; accuracy %, Friedman #1: MAE)\n")
        print(bench_sgt.accuracy_table(rows) + "\n")
        print(bench_sgt.accuracy_details(rows) + "\n")
    speed = None
    if "speed" in args.sections or "memory" in args.sections:
        speed = bench_sgt.speed(args.records, _log)
    if "speed" in args.sections and speed is not None:
        print("## Speed (prequential learn + predict)\n")
        print(bench_sgt.speed_table(speed) + "\n")
    if "memory" in args.sections and speed is not None:
        print("## Memory\n")
        print(bench_sgt.memory_table(bench_sgt.memory(speed.river.model, _log)) + "\n")
    print(f"(total {time.perf_counter() - started:,.0f} s)")
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


def _has_capymoa() -> bool:
    try:
        import capymoa  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
