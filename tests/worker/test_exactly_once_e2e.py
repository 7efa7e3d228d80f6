"""``processing_guarantee = exactly_once`` against the real broker.

What the test broker (Tansu) lets these tests see: transactions commit the group's offsets atomically
(an abort or a fenced producer commits none), a second producer with the same ``transactional.id``
fences the first, and records of a transaction still open are hidden from a read_committed consumer.
What it does not: once a transaction is aborted, its records are shown to read_committed consumers
like committed ones. So the tests check exactly-once through what decides it: the group's committed
offsets. Each run of a worker writes its predictions to a topic of its own; a run's predictions must
start exactly at the committed offsets it started from (nothing committed is produced again, nothing
is skipped) and hold each record once, and the records below the next run's starting offsets are
those a read_committed consumer of real Kafka sees, each once. The models end byte-identical to the
sgt library run offline over the same records.
"""

from __future__ import annotations

import random
import shutil
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from tests.kafka_util import committed_offsets, end_offsets, produce_records, read_all
from tests.worker.proof_util import (
    PARTITIONS,
    SLOW,
    N,
    assert_matches_offline,
    dataset,
    offline_reference,
    progress,
    proof_topics,
)
from tests.worker.worker_util import (  # start_worker_fixture provides the start_worker fixture
    caught_up,
    checkpoint_headers,
    start_worker_fixture,  # noqa: F401
    wait_for,
    worker_args,
)
from worker.checkpoints.file_store import checkpoint_path, previous_path
from worker.devtools.embedded_broker import create_topics

EXACTLY_ONCE = ["--processing-guarantee", "exactly_once"]


def _eos_args(
    bootstrap: str, group: str, topics: dict[str, str], ckpt: Path, txid: str, *extra: str
) -> list[str]:
    return worker_args(bootstrap, group, topics, ckpt, *EXACTLY_ONCE, "--transactional-id", txid, *extra)


def _with_outputs(bootstrap: str, topics: dict[str, str], tag: str) -> dict[str, str]:
    """The topics, with predictions and dead letters going to new topics of their own."""
    out = {**topics, "predictions": f"{topics['predictions']}-{tag}", "dead": f"{topics['dead']}-{tag}"}
    create_topics(bootstrap, [out["predictions"], out["dead"]], PARTITIONS)
    return out


def _predictions(
    bootstrap: str, topic: str, at_least: int = 0
) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Every prediction document by (input partition, input offset), without its timestamp (reading on
    past silences until ``at_least`` documents arrived)."""
    out: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for m in read_all(bootstrap, topic, PARTITIONS, at_least=at_least):
        doc = orjson.loads(m.value())
        doc.pop("ts")
        out.setdefault((doc["partition"], doc["offset"]), []).append(doc)
    return out


def _settle_transaction(bootstrap: str, transactional_id: str) -> None:
    """Do what a killed worker's successor does first: initialise its ``transactional.id``, which
    completes a commit the broker had received and aborts a transaction left open. Offsets read
    before that may miss a commit still in flight at the kill."""
    Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id}).init_transactions(30)


def _assert_run_starts_at(predicted: dict[tuple[int, int], list[dict]], start: dict[int, int]) -> None:
    """A run's predictions: each record once, and per partition a contiguous range from ``start``."""
    assert all(len(docs) == 1 for docs in predicted.values()), "a record was predicted twice in one run"
    for p in range(PARTITIONS):
        offsets = sorted(o for q, o in predicted if q == p)
        if offsets:
            assert offsets[0] == start[p], f"partition {p}: the run started at {offsets[0]}, not {start[p]}"
            assert offsets == list(range(offsets[0], offsets[-1] + 1)), f"partition {p}: a gap"


def test_exactly_once_predicts_what_at_least_once_predicts(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    topics, _ = proof_topics(kafka_bootstrap, separate_labels=True, seed=11)
    offline, ends = offline_reference(kafka_bootstrap, topics)
    tag = uuid.uuid4().hex[:8]
    alos_topics = _with_outputs(kafka_bootstrap, topics, "alos")
    eos_topics = _with_outputs(kafka_bootstrap, topics, "eos")
    alos_ckpt, eos_ckpt = tmp_path / "alos", tmp_path / "eos"
    alos = start_worker(
        worker_args(kafka_bootstrap, f"alos-{tag}", alos_topics, alos_ckpt, *SLOW), tmp_path / "alos.log"
    )
    eos = start_worker(
        _eos_args(kafka_bootstrap, f"eos-{tag}", eos_topics, eos_ckpt, f"eos-{tag}", *SLOW),
        tmp_path / "eos.log",
    )
    wait_for(lambda: caught_up(eos_ckpt, ends) and caught_up(alos_ckpt, ends), 120, "both to reach the ends")
    assert eos.stop(signal.SIGTERM) == 0 and alos.stop(signal.SIGTERM) == 0
    assert_matches_offline(eos_ckpt, offline, ends)
    eos_predicted = _predictions(kafka_bootstrap, eos_topics["predictions"], at_least=N)
    assert eos_predicted == _predictions(kafka_bootstrap, alos_topics["predictions"], at_least=N)
    assert len(eos_predicted) == N
    _assert_run_starts_at(eos_predicted, dict.fromkeys(range(PARTITIONS), 0))
    assert (
        committed_offsets(kafka_bootstrap, f"eos-{tag}", topics["features"], PARTITIONS) == ends["features"]
    )
    assert committed_offsets(kafka_bootstrap, f"eos-{tag}", topics["labels"], PARTITIONS) == ends["labels"]
    assert "transaction aborted" not in (tmp_path / "eos.log").read_text()


@pytest.mark.parametrize("empty_directories", [False, True])
def test_sigkill_at_random_moments_then_restart_commits_each_prediction_once(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable, empty_directories: bool
) -> None:
    """With ``empty_directories`` every run starts with an empty checkpoint directory: the states come
    from the state topic, where they were committed with the outputs."""
    topics, _ = proof_topics(kafka_bootstrap, separate_labels=True, seed=12)
    offline, ends = offline_reference(kafka_bootstrap, topics)
    group = f"eos-kill-{uuid.uuid4().hex[:8]}"
    reference_topics = _with_outputs(kafka_bootstrap, topics, "reference")
    reference = start_worker(
        worker_args(
            kafka_bootstrap, f"{group}-ref", reference_topics, tmp_path / "ref", "--checkpoint-seconds", "0.3"
        ),
        tmp_path / "ref.log",
    )

    def committed() -> int:
        return sum(committed_offsets(kafka_bootstrap, group, topics["features"], PARTITIONS).values())

    def done() -> bool:
        return all(
            committed_offsets(kafka_bootstrap, group, topics[k], PARTITIONS) == ends[k]
            for k in ("features", "labels")
        )

    rng = random.Random(17)
    targets = sorted(rng.uniform(0.1, 0.9) * N for _ in range(3))
    runs: list[tuple[dict[int, int], str]] = []  # (committed offsets at the start, predictions topic)
    for attempt, target in enumerate([*targets, None]):
        ckpt = tmp_path / (f"ckpt{attempt}" if empty_directories else "ckpt")
        run_topics = _with_outputs(kafka_bootstrap, topics, f"run{attempt}")
        runs.append(
            (
                committed_offsets(kafka_bootstrap, group, topics["features"], PARTITIONS),
                run_topics["predictions"],
            )
        )
        worker = start_worker(
            _eos_args(kafka_bootstrap, group, run_topics, ckpt, group, *SLOW), tmp_path / f"run{attempt}.log"
        )
        wait_for(lambda w=worker: w.log_count("partitions assigned") > 0, 60, "an assignment")
        if target is None:
            wait_for(done, 120, "the last worker to commit the ends")
            assert worker.stop(signal.SIGTERM) == 0
            break
        wait_for(lambda t=target: committed() >= t, 60, f"progress {target:.0f}", interval=0.02)
        time.sleep(rng.uniform(0.0, 0.05))
        assert worker.stop(signal.SIGKILL) == -signal.SIGKILL
        _settle_transaction(kafka_bootstrap, group)
    wait_for(lambda: caught_up(tmp_path / "ref", ends), 60, "the uninterrupted worker to reach the ends")
    assert reference.stop(signal.SIGTERM) == 0
    assert_matches_offline(ckpt, offline, ends)
    assert any(0 < sum(start.values()) < N for start, _ in runs), "no kill landed mid-stream"
    if empty_directories:
        sources = {e["source"] for e in worker.log_events("partition restored")}
        assert "topic" in sources, sources
    uninterrupted = _predictions(kafka_bootstrap, reference_topics["predictions"], at_least=N)
    committed_view: dict[tuple[int, int], list[dict]] = {}
    ends_of_runs = [start for start, _ in runs[1:]] + [ends["features"]]
    for (start, topic), end in zip(runs, ends_of_runs, strict=True):
        predicted = _predictions(kafka_bootstrap, topic, at_least=sum(end[p] - start[p] for p in end))
        _assert_run_starts_at(predicted, start)
        for (p, offset), docs in predicted.items():
            if offset < end[p]:  # committed by this run: below what the next run started from
                committed_view.setdefault((p, offset), []).extend(docs)
    assert committed_view == uninterrupted  # each record once, as the uninterrupted run predicted it


@pytest.mark.parametrize("state_topic", ["none", "auto"])
def test_a_checkpoint_behind_the_committed_offsets_replays_without_producing(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable, state_topic: str
) -> None:
    """The process died after a commit, before its checkpoint file was durable (made here by putting
    the previous file back). Without a state topic the records between are learned again, and not
    predicted again; with one, its copy (committed with the outputs) is restored instead."""
    topics, _ = proof_topics(kafka_bootstrap, separate_labels=False, seed=13)
    offline, ends = offline_reference(kafka_bootstrap, topics)
    ckpt, group = tmp_path / "ckpt", f"eos-behind-{uuid.uuid4().hex[:8]}"
    first_topics = _with_outputs(kafka_bootstrap, topics, "first")
    args = [*SLOW, "--state-topic", state_topic]
    first = start_worker(
        _eos_args(kafka_bootstrap, group, first_topics, ckpt, group, *args), tmp_path / "w1.log"
    )
    wait_for(lambda: progress(ckpt) > N // 3, 60, "a third of the stream", interval=0.005)
    assert first.stop(signal.SIGTERM) == 0
    committed = committed_offsets(kafka_bootstrap, group, topics["features"], PARTITIONS)
    assert 0 < sum(committed.values()) < N, "the first run should stop mid-stream"
    for p in range(PARTITIONS):
        if previous_path(ckpt, p).exists():
            shutil.copyfile(previous_path(ckpt, p), checkpoint_path(ckpt, p))
    # behind: a partition whose file is now below the committed offsets (on a loaded machine a
    # partition may have learned nothing between its last two checkpoints: its previous file is not)
    files = {p: h["next_offsets"][0] for p, (h, _) in checkpoint_headers(ckpt, PARTITIONS).items()}
    behind = sorted(p for p, offset in files.items() if offset < committed[p])
    assert behind and progress(ckpt) < sum(committed.values())
    second_topics = _with_outputs(kafka_bootstrap, topics, "second")
    second = start_worker(
        _eos_args(kafka_bootstrap, group, second_topics, ckpt, group, *args), tmp_path / "w2.log"
    )
    wait_for(lambda: caught_up(ckpt, ends), 120, "the restarted worker to reach the ends")
    assert second.stop(signal.SIGTERM) == 0
    assert_matches_offline(ckpt, offline, ends)
    second_predicted = _predictions(
        kafka_bootstrap,
        second_topics["predictions"],
        at_least=sum(ends["features"][p] - committed[p] for p in committed),
    )
    _assert_run_starts_at(second_predicted, committed)
    restored = {e["partition"]: e for e in second.log_events("partition restored")}
    replayed = sorted(p for p, e in restored.items() if e["committed_outputs_until"])
    if state_topic == "none":
        assert replayed == behind
    else:
        assert not replayed and {restored[p]["source"] for p in behind} == {"topic"}


def test_a_second_worker_with_the_same_transactional_id_fences_the_first(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    """The first worker has processed the first half of the stream when a second one starts with its
    transactional id; the second half arrives only then. The first stops (exit code 5) when it next
    uses its producer, and its group's committed offsets stay at the first half's ends: none of the
    records it processed once fenced is committed. (The second worker runs in a group of its own:
    with Tansu, a member that leaves while another joins can leave the group without assignments.)"""
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"fence-{k}-{tag}" for k in ("features", "predictions", "dead")}
    create_topics(kafka_bootstrap, list(topics.values()), PARTITIONS)
    features, _ = dataset(False, seed=14)
    produce_records(kafka_bootstrap, topics["features"], features[: N // 2])
    half = end_offsets(kafka_bootstrap, topics["features"], PARTITIONS)
    txid, first_ckpt, second_ckpt = f"eos-fence-{tag}", tmp_path / "first", tmp_path / "second"
    first_topics = _with_outputs(kafka_bootstrap, topics, "first")
    first = start_worker(
        _eos_args(kafka_bootstrap, f"{txid}-1", first_topics, first_ckpt, txid, *SLOW), tmp_path / "w1.log"
    )
    wait_for(lambda: caught_up(first_ckpt, {"features": half}), 60, "the first worker to reach the half")
    second_topics = _with_outputs(kafka_bootstrap, topics, "second")
    second = start_worker(
        _eos_args(kafka_bootstrap, f"{txid}-2", second_topics, second_ckpt, txid, *SLOW), tmp_path / "w2.log"
    )
    wait_for(lambda: second.log_count("worker started") > 0, 60, "the second worker's producer")
    produce_records(kafka_bootstrap, topics["features"], features[N // 2 :])  # work for the fenced one
    assert first.proc.wait(60) == 5  # fenced: it stops cleanly, committing nothing more
    assert first.log_count("the output producer was fenced") >= 1 and first.log_events("worker stopped")
    assert committed_offsets(kafka_bootstrap, f"{txid}-1", topics["features"], PARTITIONS) == half
    assert {
        p: h["next_offsets"][0] for p, (h, _) in checkpoint_headers(first_ckpt, PARTITIONS).items()
    } == half
    offline, ends = offline_reference(kafka_bootstrap, topics)
    assert ends["features"] != half
    wait_for(lambda: caught_up(second_ckpt, ends), 120, "the second worker to reach the ends")
    assert second.stop(signal.SIGTERM) == 0
    assert_matches_offline(second_ckpt, offline, ends)
    _assert_run_starts_at(
        _predictions(kafka_bootstrap, second_topics["predictions"], at_least=N),
        dict.fromkeys(range(PARTITIONS), 0),
    )


pytestmark = pytest.mark.timeout(300)
