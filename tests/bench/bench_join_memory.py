"""Memory of a worker whose join buffer fills with large labels, over the embedded Tansu broker.

Run from the repository root (not part of pytest; loopback only)::

    .venv/bin/python -m tests.bench.bench_join_memory                       # 1,500 labels of 600 KB
    .venv/bin/python -m tests.bench.bench_join_memory --labels 150          # a quick look
    .venv/bin/python -m tests.bench.bench_join_memory --worker-src DIR      # the worker of another tree

A labels topic receives ``--labels`` labels of ``--label-kb`` KB whose features never come, then the
features topic one record later in event time, so that every label waits in the join buffer. ONE
``python -m worker run`` process (its sources from ``--worker-src``, the repository by default; a
checkout of an older commit compares releases) consumes them with default settings but
``--checkpoint-seconds`` (5). Measured: the process's resident memory every 20 ms (peak, and at the
end) and its kernel high-water mark, the checkpoint file's size, the checkpoints' mean duration (the
worker's ``sgt_checkpoint_seconds``), the slowest ``/healthz`` answer (probed every 100 ms), the
labels dropped from the buffer, and the time to stop after SIGTERM (final checkpoint included).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Producer

from tests.worker.worker_util import samples, value
from worker.checkpoints.file_store import checkpoint_path, read_newest
from worker.core.partition_state import split_state
from worker.devtools.embedded_broker import create_topics, free_port, start_tansu

REPO = Path(__file__).resolve().parents[2]
WAIT_LIMIT_S = 900.0


def _rss_kb(pid: int, field: str = "VmRSS") -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Sampler(threading.Thread):
    """Samples a process's resident memory and the latency of its /healthz until stopped."""

    def __init__(self, pid: int, port: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.port = pid, port
        self.peak_kb = 0
        self.slowest_health_s = 0.0
        self.unanswered = 0
        self.answered = False
        self.done = threading.Event()

    def run(self) -> None:
        next_probe = 0.0
        while not self.done.is_set():
            self.peak_kb = max(self.peak_kb, _rss_kb(self.pid))
            if time.monotonic() >= next_probe:
                next_probe = time.monotonic() + 0.1
                threading.Thread(target=self._probe, daemon=True).start()
            time.sleep(0.02)

    def _probe(self) -> None:
        started = time.monotonic()
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=60).read()
        except OSError:
            self.unanswered += self.answered  # before the server's first answer, it is starting
            return
        self.answered = True
        self.slowest_health_s = max(self.slowest_health_s, time.monotonic() - started)


def produce(bootstrap: str, topics: dict[str, str], labels: int, label_bytes: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "message.max.bytes": label_bytes + (1 << 16)}
    )
    pad = "z" * label_bytes
    for i in range(labels):
        doc = {"id": f"orphan{i:06d}", "y": "a", "ts": 1000.0 + i, "pad": pad}
        while True:
            try:
                producer.produce(topics["labels"], orjson.dumps(doc), f"q{i}".encode(), partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    feature = {"id": "f0", "x": {"a": 1.0}, "ts": 1000.0 + labels}
    producer.produce(topics["features"], orjson.dumps(feature), b"k0", partition=0)
    if producer.flush(120):
        raise SystemExit("the bench input was not delivered")


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
        return samples(response.read().decode())


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-join-memory-"))
    with start_tansu(log_path=workdir / "tansu.log") as broker:
        bootstrap = broker.bootstrap_servers
        tag = uuid.uuid4().hex[:8]
        topics = {k: f"{k}-{tag}" for k in ("features", "labels", "predictions", "dead")}
        create_topics(bootstrap, list(topics.values()), 1)
        started = time.monotonic()
        produce(bootstrap, topics, args.labels, args.label_kb * 1000)
        produce_s = time.monotonic() - started
        ckpt, port = workdir / "ckpt", free_port()
        command = [
            sys.executable,
            *("-m", "worker", "run", "--bootstrap-servers", bootstrap, "--group-id", f"bench-{tag}"),
            *("--features-topic", topics["features"], "--labels-topic", topics["labels"]),
            *("--predictions-topic", topics["predictions"], "--dead-letter-topic", topics["dead"]),
            *("--checkpoint-dir", str(ckpt), "--checkpoint-seconds", str(args.checkpoint_seconds)),
            *("--metrics-port", str(port), "--metrics-host", "127.0.0.1"),
            *("--session-timeout-ms", "6000", "--heartbeat-interval-ms", "1000"),
            *args.worker_args,
        ]
        with (workdir / "worker.log").open("ab") as log:
            process = subprocess.Popen(command, cwd=args.worker_src, stdout=log, stderr=subprocess.STDOUT)
        sampler = Sampler(process.pid, port)
        sampler.start()
        started = time.monotonic()
        try:
            while time.monotonic() - started < WAIT_LIMIT_S:
                loaded = read_newest(ckpt, 0) if checkpoint_path(ckpt, 0).exists() else None
                if loaded is not None and split_state(loaded.payload)[0]["next_offsets"] == [1, args.labels]:
                    break
                if process.poll() is not None:
                    raise SystemExit(f"the worker exited with {process.returncode}; see {workdir}/worker.log")
                time.sleep(0.2)
            else:
                raise SystemExit(f"the worker did not reach the end in {WAIT_LIMIT_S:.0f} s")
            consumed_s = time.monotonic() - started
            time.sleep(2.0)  # let the gauges and the histogram catch up
            metrics = scrape(port)
            end_kb, hwm_kb = _rss_kb(process.pid), _rss_kb(process.pid, "VmHWM")
            stopping = time.monotonic()
            process.send_signal(signal.SIGTERM)
            code = process.wait(WAIT_LIMIT_S)
            stop_s = time.monotonic() - stopping
        finally:
            sampler.done.set()
            if process.poll() is None:
                process.kill()
        count = value(metrics, "sgt_checkpoint_seconds_count") or 0.0
        total = value(metrics, "sgt_checkpoint_seconds_sum") or 0.0
        return {
            "labels": args.labels,
            "label_kb": args.label_kb,
            "worker_src": str(args.worker_src),
            "produce_s": round(produce_s, 1),
            "consume_s": round(consumed_s, 1),
            "rss_end_mb": round(end_kb / 1024),
            "rss_peak_mb": round(max(sampler.peak_kb, hwm_kb) / 1024),
            "checkpoint_mb": round(checkpoint_path(ckpt, 0).stat().st_size / 1e6, 1),
            "checkpoints": int(count),
            "checkpoint_mean_s": round(total / count, 2) if count else None,
            "slowest_healthz_s": round(sampler.slowest_health_s, 2),
            "healthz_unanswered": sampler.unanswered,
            "labels_kept": value(metrics, "sgt_join_pending", partition="0", side="labels"),
            "labels_dropped": value(
                metrics, "sgt_join_expired_total", partition="0", side="labels", reason="size"
            ),
            "stop_s": round(stop_s, 1),
            "exit_code": code,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=int, default=1500)
    parser.add_argument("--label-kb", type=int, default=600)
    parser.add_argument("--checkpoint-seconds", type=float, default=5.0)
    parser.add_argument("--worker-src", type=Path, default=REPO, help="Directory holding the worker package.")
    parser.add_argument("worker_args", nargs="*", help="More `sgt-worker run` flags (after --).")
    result = run(parser.parse_args(argv))
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
