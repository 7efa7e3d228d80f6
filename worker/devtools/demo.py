"""`sgt-worker demo`: everything in one process, nothing to install but the package and its demo extra.

Starts the embedded Tansu broker on a free loopback port, creates the topics, produces a synthetic
stream with concept drift (so the model visibly adapts) with inline labels or, with ``--label-delay``,
labels on a separate topic, runs a worker on it in a thread, serves its metrics, and prints live
per-partition progress (records, recent prequential error, tree size) until Ctrl-C or ``--duration``
seconds. The worker's settings come from the same sources as ``sgt-worker run``'s (see
:func:`demo_settings`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from types import FrameType
from typing import Any

from worker.checkpoints import file_store
from worker.config import MODELS, ConfigError, WorkerSettings, load_settings, read_toml
from worker.kafka.loop import Worker
from worker.logs import configure_logging
from worker.metrics import Health, MetricsServer, WorkerMetrics

_TOPICS = ("features", "labels", "predictions", "dead-letters")
DEMO_PRODUCER: dict[str, int] = {"linger.ms": 100}
"""The demo producer's batching: the embedded broker's fetch cost grows with the record batches a
partition holds, so the demo sends few large batches (50 records a partition at the default rate)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from worker.devtools.streams import DEMO_STREAM, STREAMS

    parser.add_argument(
        "--duration", type=float, default=None, help="Stop after this many seconds (default: Ctrl-C)."
    )
    parser.add_argument(
        "--rate", type=float, default=2000.0, help="Records per second produced (default 2000)."
    )
    parser.add_argument(
        "--partitions", type=int, default=4, help="Partitions of the demo topics (default 4)."
    )
    parser.add_argument("--stream", choices=sorted(STREAMS), default=DEMO_STREAM, help="Synthetic stream.")
    parser.add_argument(
        "--model",
        choices=MODELS,
        default=None,
        help="Model of each partition (default: the worker's, see the 'model' setting).",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="Metrics port (default: the metrics_port setting, 8000; 0 = any free).",
    )
    parser.add_argument(
        "--checkpoint-dir", default=None, help="Checkpoint directory (default: a temporary one)."
    )
    parser.add_argument(
        "--label-delay",
        type=float,
        default=0.0,
        help="Send labels to a separate 'labels' topic this many seconds after their features (0: inline).",
    )
    parser.add_argument(
        "--log-level",
        default=None,
        choices=("debug", "info", "warning", "error"),
        help="Worker log level (default: the log_level setting if given, else warning).",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="TOML file of worker settings, as for 'sgt-worker run' (env SGT_CONFIG); SGT_* variables "
        "apply too. The demo's broker, group, topics, checkpoint directory and metrics address stay its own.",
    )


def argument_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the demo's options, checked before the broker starts; None when nothing."""
    if args.duration is not None and not args.duration > 0:
        return f"--duration must be > 0 seconds, got {args.duration:g}"
    if not args.rate > 0:
        return f"--rate must be > 0 records per second, got {args.rate:g}"
    if args.partitions < 1:
        return f"--partitions must be >= 1, got {args.partitions}"
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        return f"--metrics-port must be in 0..65535, got {args.metrics_port}"
    if not args.label_delay >= 0:
        return f"--label-delay must be >= 0 seconds, got {args.label_delay:g}"
    if args.checkpoint_dir is not None:
        return file_store.directory_problem(args.checkpoint_dir)
    return None


DEMO_DEFAULTS: dict[str, Any] = {
    # Tansu completes a group join in about half of session.timeout.ms: 3 s instead of 5 s
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 1000,
    "checkpoint_seconds": 5.0,
    "log_level": "warning",
    # the embedded broker keeps nothing after the demo, so a state topic would protect nothing, while
    # each partition's read at the start waits for fetch_wait_max_ms (about 3 s of the start) and
    # every state written stays in the broker's memory
    "state_topic": "none",
}
"""Settings the demo uses unless a flag, an ``SGT_*`` variable or the ``--config`` file gives them."""

_PLACEHOLDER_BROKER = "127.0.0.1:9092"  # validation before the embedded broker has its port


def demo_settings(
    args: argparse.Namespace, bootstrap: str, checkpoint_dir: str, env: Mapping[str, str] | None = None
) -> WorkerSettings:
    """The demo worker's settings, from the same sources as ``sgt-worker run``'s.

    Precedence: the demo's own (the embedded broker's address, its group, topics and checkpoint
    directory, metrics on loopback) > the demo's flags (``--model``, ``--metrics-port``,
    ``--log-level``) > ``SGT_*`` variables > the TOML file (``--config`` or ``SGT_CONFIG``) >
    :data:`DEMO_DEFAULTS` > the settings' defaults. Raises ConfigError for a bad value.

    >>> import argparse
    >>> args = argparse.Namespace(config=None, model=None, metrics_port=None, log_level=None, label_delay=0)
    >>> s = demo_settings(args, "127.0.0.1:1", "/tmp/c", env={"SGT_CHECKPOINT_SECONDS": "2"})
    >>> (s.bootstrap_servers, s.group_id, s.checkpoint_seconds, s.session_timeout_ms)
    ('127.0.0.1:1', 'sgt-demo', 2.0, 6000)
    """
    env = os.environ if env is None else env
    config_path = args.config or env.get("SGT_CONFIG")
    file_values = {**DEMO_DEFAULTS, **(read_toml(config_path) if config_path else {})}
    features, labels, predictions, dead_letters = _TOPICS
    flags = {
        "bootstrap_servers": bootstrap,
        "group_id": "sgt-demo",
        "features_topic": features,
        "labels_topic": labels if args.label_delay > 0 else "none",
        "predictions_topic": predictions,
        "dead_letter_topic": dead_letters,
        "checkpoint_dir": checkpoint_dir,
        "metrics_host": "127.0.0.1",
        "metrics_port": args.metrics_port,
        "model": args.model,
        "log_level": args.log_level,
    }
    return load_settings(flags, env, file_values)


def run(args: argparse.Namespace) -> int:
    from worker.devtools.embedded_broker import BrokerNotInstalled, broker_binary

    problem = argument_problem(args)
    if problem is None:
        try:
            demo_settings(args, _PLACEHOLDER_BROKER, args.checkpoint_dir or tempfile.gettempdir())
            broker_binary()
        except (ConfigError, BrokerNotInstalled) as exc:
            problem = str(exc)
    if problem is not None:
        print(f"sgt-worker demo: {problem}", file=sys.stderr)
        return 2
    stop = threading.Event()
    _stop_on_signals(stop)
    with contextlib.ExitStack() as stack:
        # the broker keeps nothing after the demo, so neither do checkpoints in a directory we made
        ckpt = args.checkpoint_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="sgt-demo-"))
        _run(args, ckpt, stop)
    return 0


def _run(args: argparse.Namespace, ckpt: str, stop: threading.Event) -> None:
    from worker.devtools.embedded_broker import create_topics, start_tansu
    from worker.devtools.produce import produce_stream
    from worker.devtools.streams import make_stream

    with start_tansu() as broker:
        bs = broker.bootstrap_servers
        create_topics(bs, list(_TOPICS), args.partitions)
        settings = demo_settings(args, bs, ckpt)
        metrics, health = WorkerMetrics(), Health()
        server = _metrics_server(metrics, health, settings.metrics_port)
        worker = Worker(settings, metrics, health, log=configure_logging(settings.log_level))
        print(
            f"broker {bs}; metrics http://127.0.0.1:{server.port}/metrics; checkpoints {ckpt}; "
            f"stream {args.stream} at {args.rate:g} records/s; Ctrl-C to stop",
            flush=True,
        )
        threads = [
            threading.Thread(target=worker.run, name="worker"),
            threading.Thread(
                target=produce_stream,
                args=(bs, "features", settings.labels_topic, make_stream(args.stream), None, args.rate),
                kwargs={"stop": stop, "label_delay": args.label_delay, "producer_config": DEMO_PRODUCER},
                name="producer",
                daemon=True,
            ),
        ]
        for thread in threads:
            thread.start()
        deadline = None if args.duration is None else time.monotonic() + args.duration
        try:
            while not stop.wait(1.0) and (deadline is None or time.monotonic() < deadline):
                print(progress_line(worker), flush=True)
        finally:
            print(progress_line(worker, final=True), flush=True)
            stop.set()
            worker.stop()
            threads[0].join(60)
            threads[1].join(10)
            server.close()


def _metrics_server(metrics: WorkerMetrics, health: Health, port: int) -> MetricsServer:
    """The metrics server on ``port``, or on a free port when that one is taken (the demo must start)."""
    try:
        return MetricsServer(metrics, health, "127.0.0.1", port).start()
    except OSError:
        print(f"port {port} is taken; serving metrics on a free port instead", flush=True)
        return MetricsServer(metrics, health, "127.0.0.1", 0).start()


def progress_line(worker: Worker, final: bool = False) -> str:
    """One line: per partition, records consumed, recent error and tree nodes (an ensemble's: its
    trees' nodes, its trees and the drifts it answered)."""
    parts = []
    for p, owned in sorted(dict(worker.owned).items()):
        state = owned.state
        error = state.prequential.recent_error
        shown = "  -  " if math.isnan(error) else f"{error:.3f}"
        model = state.model
        # an ensemble's trees and drifts (members the worker's model protocol does not require)
        trees, drifts = getattr(model, "n_trees", None), getattr(model, "n_drifts", None)
        ensemble = f" trees {trees} drifts {drifts}" if drifts is not None else ""
        parts.append(f"p{p}: {state.consumed[0]:>7} rec err {shown} nodes {model.n_nodes:>3}{ensemble}")
    head = "final " if final else time.strftime("%H:%M:%S ")
    return head + (" | ".join(parts) if parts else "waiting for partitions...")


def _stop_on_signals(stop: threading.Event) -> None:
    def handle(_signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            sys.exit(130)
        stop.set()

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
