"""``sgt-worker``: run, demo, produce and inspect.

``sgt-worker run`` runs one worker of the group (every setting as a flag, an ``SGT_*`` environment
variable or a TOML key; ``sgt-worker run --help`` lists them); ``demo`` runs broker, producer and
worker in one process; ``produce`` generates load; ``inspect PATH`` summarises checkpoints as JSON.

Exit codes of ``run``: 0 stopped cleanly, every owned partition checkpointed; 1 the worker failed
(the loop raised; nothing written after the last checkpoint); 2 a bad setting or an unusable
checkpoint directory; 3 the graceful shutdown overran ``shutdown_timeout_seconds``; 4 stopped, but
the final checkpoint of some partition was not written (an output not delivered, a failed write):
its records since the last checkpoint are processed again by the next owner; 5 (exactly_once) the
output producer was fenced: another worker took its transactional id over, or the broker ended its
transactional session; nothing produced since the last commit is committed; 6 the state topic was
deleted or created again while the worker ran: it stopped after writing its final checkpoints to the
files (the next start creates the topic again and fills it from them).
"""

from __future__ import annotations

# Only light modules here: `main` installs the signal handlers before anything heavy is imported
# (the settings import the learning library, about half a second), so that a SIGTERM that comes
# while the process starts is logged and stops it cleanly instead of killing it (see _EarlySignals).
import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from types import FrameType, ModuleType
from typing import TYPE_CHECKING

import worker

if TYPE_CHECKING:
    from worker.kafka.loop import Worker

EXIT_NO_FINAL_CHECKPOINT = 4
EXIT_FENCED = 5
EXIT_STATE_TOPIC_LOST = 6


def _run_epilog() -> str:
    from worker.config import SETTINGS

    return (
        "Precedence: flags > SGT_* environment variables > the TOML file (--config or SGT_CONFIG; keys are "
        "the setting names, e.g. group_id = 'g', at the top level or in a [worker] table) > defaults. "
        f"Settings: {', '.join(s.name for s in SETTINGS)}."
    )


#: the dev tools' subcommands (modules of worker.devtools, imported only when one of them runs)
DEV_COMMANDS = {
    "demo": "Embedded broker + synthetic producer + worker, with live progress.",
    "produce": "Rate-limited load generator (synthetic streams or a file).",
}
#: the extra that installs what the dev tools need beyond the worker (the embedded broker)
DEV_EXTRA = "demo"


class DevToolsMissing(RuntimeError):
    """A dev tools subcommand ran where the dev tools are not installed (the production image)."""


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser; a dev tools subcommand's own options are parsed by `parse_args`."""
    from worker.config import add_arguments

    parser = argparse.ArgumentParser(
        prog="sgt-worker", description="A Kafka worker that learns with Stochastic Gradient Trees."
    )
    parser.add_argument("--version", action="version", version=f"sgt-worker {worker.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="Run a worker against a broker.",
        description="Run one worker of the group.",
        epilog=_run_epilog(),
    )
    add_arguments(run)
    for name, summary in DEV_COMMANDS.items():
        sub.add_parser(name, help=summary, add_help=False)  # `--help` goes to the tool's own parser
    inspect = sub.add_parser(
        "inspect", help="JSON summary of a checkpoint file or directory, or of a state topic."
    )
    inspect.add_argument("path", nargs="?", help="A checkpoint file, or the checkpoint directory.")
    inspect.add_argument(
        "--state-topic", metavar="TOPIC", help="Summarise the newest state of every partition of TOPIC."
    )
    inspect.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="The broker holding --state-topic.")
    inspect.add_argument("--tree", action="store_true", help="Also print the tree(s) of the model.")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's arguments; a dev tools subcommand's options by that tool's parser.

    Raises DevToolsMissing for a dev tools subcommand where worker.devtools is not installed.
    """
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command not in DEV_COMMANDS:
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return args
    tool_parser = argparse.ArgumentParser(
        prog=f"{parser.prog} {args.command}", description=DEV_COMMANDS[args.command]
    )
    dev_tool(args.command).add_arguments(tool_parser)
    return tool_parser.parse_args(rest, namespace=args)


def dev_tool(name: str) -> ModuleType:
    """The module of the dev tools subcommand ``name`` (DevToolsMissing when they are not installed)."""
    try:
        return importlib.import_module(f"worker.devtools.{name}")
    except ModuleNotFoundError as exc:
        if exc.name not in ("worker.devtools", f"worker.devtools.{name}"):
            raise
        raise DevToolsMissing(
            f"{name} is one of the dev tools, which this installation leaves out (the production image "
            f"does): install them with the {DEV_EXTRA} extra, pip install 'sgt-stream[{DEV_EXTRA}]'"
        ) from None


class _EarlySignals:
    """SIGTERM and SIGINT that arrive before the worker exists, kept for it.

    Python's default action for SIGTERM ends the process at once, without a log line, and start-up
    (imports, settings, the metrics server) takes about half a second. :meth:`install` is the first
    thing :func:`main` does; the worker's own handlers (:func:`_handle_signals`) take over and act on
    what was kept. A second signal before then ends the process at once, as it does later.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self._previous: dict[int, object] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set there (main() called from a thread: tests)
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, self._keep)

    def _keep(self, signum: int, _frame: FrameType | None) -> None:
        if self.received:
            os._exit(128 + signum)
        self.received.append(signum)

    def restore(self) -> None:
        """Give the signals back to their previous handlers (a command other than run), and deliver
        the one kept, if any, to them."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]  # what signal() returned for it, as it was
        self._previous.clear()
        for signum in self.received:
            signal.raise_signal(signum)


def main(argv: list[str] | None = None) -> int:
    early = _EarlySignals()
    early.install()
    try:
        args = parse_args(argv)
    except DevToolsMissing as exc:
        early.restore()
        print(f"sgt-worker: {exc}", file=sys.stderr)
        return 2
    except BaseException:
        early.restore()
        raise
    if args.command == "run":
        return run_command(args, early.received)
    early.restore()
    if args.command in DEV_COMMANDS:
        status: int = dev_tool(args.command).run(args)
        return status
    return inspect_command(args)


def inspect_command(args: argparse.Namespace) -> int:
    from worker.inspect import command, topic_command

    if (args.path is None) == (args.state_topic is None) or (args.state_topic and not args.bootstrap_servers):
        print(
            "sgt-worker inspect: give a checkpoint PATH, or --state-topic TOPIC with --bootstrap-servers",
            file=sys.stderr,
        )
        return 2
    if args.state_topic is not None:
        return topic_command(args.bootstrap_servers, args.state_topic, args.tree)
    return command(args.path, args.tree)


def run_command(args: argparse.Namespace, early_signals: list[int] | None = None) -> int:
    """``sgt-worker run``; ``early_signals``: SIGTERM or SIGINT received before the worker existed
    (the worker stops at once, as for a signal received while it runs)."""
    from worker.checkpoints import file_store
    from worker.checkpoints.transactional import TransactionFenced
    from worker.config import SETTINGS, ConfigError, describe, redacted, settings_from_args, unknown_variables
    from worker.kafka.loop import FinalCheckpointError, Worker
    from worker.logs import configure_logging, fields
    from worker.metrics import Health, MetricsServer, WorkerMetrics
    from worker.state_topic.errors import StateTopicLost

    try:
        settings = settings_from_args(args)
    except ConfigError as exc:
        print(f"sgt-worker run: {exc}", file=sys.stderr)
        return 2
    problem = file_store.directory_problem(settings.checkpoint_dir)
    if problem is not None:
        print(f"sgt-worker run: {describe('checkpoint_dir')}: {problem}", file=sys.stderr)
        return 2
    log = configure_logging(settings.log_level)
    for variable, closest in unknown_variables(os.environ):
        log.warning(
            "unknown SGT_ environment variable ignored (no setting has that name)",
            extra=fields(variable=variable, closest=closest),
        )

    metrics = WorkerMetrics()
    health = Health(max_checkpoint_failures=settings.unhealthy_after_checkpoint_failures)
    server = None
    if settings.metrics_port:
        try:
            server = MetricsServer(metrics, health, settings.metrics_host, settings.metrics_port).start()
        except OSError as exc:
            where = f"{settings.metrics_host}:{settings.metrics_port}"
            print(
                f"sgt-worker run: setting metrics_port: cannot serve on {where}: {exc.strerror}",
                file=sys.stderr,
            )
            return 2
    worker = Worker(settings, metrics=metrics, health=health, log=log)
    _handle_signals(worker, settings.shutdown_timeout_seconds, log, early_signals or [])
    shown = {s.name: getattr(settings, s.name) for s in SETTINGS}
    shown["kafka_options"] = redacted(settings.kafka_options)
    log.info("settings", extra=fields(**shown))
    try:
        worker.run()
    except FinalCheckpointError as exc:
        log.error("worker stopped without its final checkpoint", extra=fields(error=str(exc)))
        return EXIT_NO_FINAL_CHECKPOINT
    except TransactionFenced as exc:
        log.error("worker stopped: its output producer was fenced", extra=fields(error=str(exc)))
        return EXIT_FENCED
    except StateTopicLost as exc:
        log.error(
            "worker stopped: the state topic was deleted or created again", extra=fields(error=str(exc))
        )
        return EXIT_STATE_TOPIC_LOST
    except file_store.OwnerConflict as exc:
        log.error("checkpoint directory refused", extra=fields(error=str(exc)))
        return 2
    except ConfigError as exc:  # found only once the broker answers (the state topic's settings)
        log.error("setting refused", extra=fields(error=str(exc)))
        print(f"sgt-worker run: {exc}", file=sys.stderr)
        return 2
    except Exception:
        log.exception("worker failed")
        return 1
    finally:
        if server is not None:
            server.close()
    return 0


def _handle_signals(worker: Worker, timeout_s: float, log: logging.Logger, early: list[int]) -> None:
    """SIGTERM/SIGINT stop the worker gracefully; a watchdog ends the process if that overruns.
    ``early``: signals received before these handlers were installed, handled now."""
    from worker.logs import fields

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if worker.stopping:
            os._exit(128 + signum)  # a second signal: stop now
        log.info("signal received; shutting down", extra=fields(signal=signal.Signals(signum).name))
        worker.stop()
        watchdog = threading.Timer(timeout_s, _overrun, args=(log,))
        watchdog.daemon = True
        watchdog.start()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    for signum in early[:1]:  # a second one would have ended the process already
        on_signal(signum, None)


def _overrun(log: logging.Logger) -> None:
    log.error("graceful shutdown took too long; exiting")
    os._exit(3)
