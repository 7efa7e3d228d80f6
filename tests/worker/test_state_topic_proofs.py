"""State-topic proofs against the real broker: the checkpoint directory is only a cache.

(a) SIGKILL at three random moments, every restart on a new, EMPTY checkpoint directory; (b) two
workers on separate checkpoint directories with the partitions moving between them, one of them coming
back to its stale directory; (c) a worker whose partition a newer owner claimed in the state topic (a
zombie) gives the partition up and its later state never wins. In (a) and (b), once the input is
consumed, every partition's state in the state topic (and in the last worker's directory) holds a
model byte-identical to the offline run (what one uninterrupted worker computes), next offsets at
the ends of both topics and the offline prequential metrics, and the group's committed offsets are
the ends. (a) also bounds the repeated predictions: every restart resumes each partition at the killed
run's last checkpoint (or the one before it, whose successor was still on its way to the state topic),
and a record is predicted again only by a run that restored a state from before it, so what a kill
repeats is what followed each partition's last state-topic checkpoint, not the whole topic.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.kafka_util import produce_records, read_all
from tests.worker.proof_util import (
    PARTITIONS,
    SLOW,
    N,
    assert_matches_offline,
    assert_states_match_offline,
    dataset,
    offline_reference,
    progress,
    proof_topics,
    topic_states,
)
from tests.worker.worker_util import (  # start_worker_fixture provides the start_worker fixture
    WorkerProcess,
    caught_up,
    start_worker_fixture,  # noqa: F401
    topic_args,
    wait_for,
    worker_args,
)
from worker.devtools.embedded_broker import create_topics
from worker.inspect import topic_command
from worker.state_topic.admin import StateTopicConfig
from worker.state_topic.client import StateTopic


def _committed(bootstrap: str, group: str, topics: dict[str, str]) -> dict[str, dict[int, int]]:
    """The group's committed offsets of the input topics."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        out: dict[str, dict[int, int]] = {}
        for kind in ("features", "labels"):
            if kind in topics:
                tps = [TopicPartition(topics[kind], p) for p in range(PARTITIONS)]
                out[kind] = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=20)}
        return out
    finally:
        consumer.close()


def _at(
    states: dict[int, tuple[dict[str, Any], bytes]], ends: dict[str, dict[int, int]], partitions: range
) -> bool:
    """The states of these partitions have reached the features topic's ends."""
    return all(p in states and states[p][0]["next_offsets"][0] == ends["features"][p] for p in partitions)


def _checkpoints_written(worker: WorkerProcess) -> dict[int, list[list[int]]]:
    """Each partition's checkpoint files a worker wrote, in order: their next offsets."""
    out: dict[int, list[list[int]]] = {p: [] for p in range(PARTITIONS)}
    for event in worker.log_events("checkpoint written"):
        out[event["partition"]].append(event["next_offsets"])
    return out


def _restored_from(worker: WorkerProcess) -> dict[int, dict[str, Any]]:
    """Each partition's first restore in a worker's log: its source and features offset."""
    events = worker.log_events("partition restored") + worker.log_events("partition starts fresh")
    out: dict[int, dict[str, Any]] = {}
    for event in sorted(events, key=lambda e: e["ts"]):
        out.setdefault(event["partition"], event)
    return out


def test_sigkills_with_an_empty_checkpoint_directory_at_every_restart(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    topics, _ = proof_topics(kafka_bootstrap, separate_labels=True, seed=12)
    offline, ends = offline_reference(kafka_bootstrap, topics)
    group = f"state-a-{uuid.uuid4().hex[:8]}"
    rng = random.Random(11)
    targets = sorted(rng.uniform(0.1, 0.9) * N for _ in range(3))
    runs: list[WorkerProcess] = []
    for attempt, target in enumerate([*targets, None]):
        ckpt = tmp_path / f"ckpt{attempt}"  # a new, empty directory at every start
        args = worker_args(kafka_bootstrap, group, topics, ckpt, *SLOW)  # state topic: auto
        worker = start_worker(args, tmp_path / f"run{attempt}.log")
        runs.append(worker)
        wait_for(lambda w=worker: w.log_count("partitions assigned") > 0, 60, "an assignment")
        if target is None:
            wait_for(lambda c=ckpt: caught_up(c, ends), 120, "the last worker to reach the ends")
            assert worker.stop(signal.SIGTERM) == 0
            break
        wait_for(lambda c=ckpt, t=target: progress(c) >= t, 60, f"progress {target:.0f}", interval=0.02)
        time.sleep(rng.uniform(0.0, 0.05))
        assert worker.stop(signal.SIGKILL) == -signal.SIGKILL

    states = topic_states(kafka_bootstrap, f"{group}-state")
    assert_states_match_offline(states, offline, ends)
    assert_matches_offline(tmp_path / f"ckpt{len(targets)}", offline, ends)
    out, err = io.StringIO(), io.StringIO()
    assert topic_command(kafka_bootstrap, f"{group}-state", False, out, err) == 0, err.getvalue()
    shown = {s["partition"]: s["model_sha256"] for s in orjson.loads(out.getvalue())}
    assert shown == {p: hashlib.sha256(offline[p][0]).hexdigest() for p in range(PARTITIONS)}
    assert _committed(kafka_bootstrap, group, topics) == {k: ends[k] for k in ("features", "labels")}

    # Where each run started every partition: from the state topic, since its directory was empty, at
    # the newest state the killed run put there: its last checkpoint, or the one before it when the last
    # one's copy was still travelling to the topic (a partition has one checkpoint in flight at a time,
    # and its copy goes to the topic only once the file is written). Not from scratch, nor older.
    starts = [{p: [0, 0] for p in range(PARTITIONS)}]
    for killed, worker in itertools.pairwise(runs):
        restored = _restored_from(worker)
        assert sorted(restored) == list(range(PARTITIONS))
        for event in restored.values():
            in_topic = event["state_topic_records_seen"] is not None
            assert event["source"] == ("topic" if in_topic else "fresh"), event
        written = _checkpoints_written(killed)
        for p, event in restored.items():
            newest = [starts[-1][p], *written[p]][-2:]
            assert event["next_offsets"] in newest, (p, event["next_offsets"], newest)
        starts.append({p: e["next_offsets"] for p, e in restored.items()})
    assert any(s[p][0] > 0 for s in starts[1:] for p in range(PARTITIONS)), "no restart restored progress"
    for before, after in itertools.pairwise(starts):
        assert all(a >= b for p in range(PARTITIONS) for a, b in zip(after[p], before[p], strict=True)), (
            "a restart went backwards"
        )

    # A record is predicted once, plus once per later run that restored a state from before it.
    counts = Counter(
        (m.partition(), orjson.loads(m.value())["offset"])
        for m in read_all(kafka_bootstrap, topics["predictions"], PARTITIONS, at_least=N)
    )
    # How many that is depends on how far a run got past its last checkpoint before its kill (a slow
    # broker or disk under load keeps a checkpoint in flight for longer), not on the restores.
    for p in range(PARTITIONS):
        for offset in range(ends["features"][p]):
            runs_before = sum(1 for s in starts if s[p][0] <= offset)
            assert 1 <= counts[(p, offset)] <= runs_before, (p, offset, counts[(p, offset)], starts)


def test_partitions_moving_between_workers_with_separate_directories(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    topics, _ = proof_topics(kafka_bootstrap, separate_labels=False, seed=13)
    group = f"state-b-{uuid.uuid4().hex[:8]}"
    dir_one, dir_two = tmp_path / "one", tmp_path / "two"

    def args(ckpt: Path) -> list[str]:
        return worker_args(kafka_bootstrap, group, topics, ckpt, *SLOW)

    def more(batch: int) -> tuple[dict[int, tuple[bytes, dict]], dict[str, dict[int, int]]]:
        """Produce the next N records (later event times); the offline result over all so far."""
        features, _ = dataset(separate_labels=False, seed=13 + batch, start_ts=1000.0 + 0.01 * N * batch)
        produce_records(kafka_bootstrap, topics["features"], features)
        return offline_reference(kafka_bootstrap, topics, records=(batch + 1) * N)

    one = start_worker(args(dir_one), tmp_path / "one.log")
    wait_for(lambda: progress(dir_one) > 0, 60, "a first checkpoint")
    two = start_worker(args(dir_two), tmp_path / "two.log")
    wait_for(lambda: two.log_count("partitions assigned") > 0, 60, "the second worker joining")
    wait_for(lambda: len(one.log_events("partitions assigned")) > 1, 60, "the first worker's new assignment")
    assert one.stop(signal.SIGTERM) == 0  # every partition moves to the second worker
    wait_for(lambda: len(two.log_events("partitions assigned")) > 1, 60, "the second worker taking all")
    _, ends = more(1)  # the first directory is now behind on every partition
    wait_for(lambda: caught_up(dir_two, ends), 120, "the second worker to reach the ends")
    # The first worker comes back to its stale directory and takes every partition back.
    back = start_worker(args(dir_one), tmp_path / "back.log")
    wait_for(lambda: back.log_count("partitions assigned") > 0, 60, "the first worker rejoining")
    assert two.stop(signal.SIGTERM) == 0
    wait_for(lambda: len(back.log_events("partitions assigned")) > 1, 60, "the first worker taking all")
    offline, ends = more(2)
    wait_for(lambda: caught_up(dir_one, ends), 120, "the returning worker to reach the ends")
    assert back.stop(signal.SIGTERM) == 0

    assert_states_match_offline(topic_states(kafka_bootstrap, f"{group}-state"), offline, ends)
    assert_matches_offline(dir_one, offline, ends)
    assert _committed(kafka_bootstrap, group, topics) == {"features": ends["features"]}
    # the second worker started with an empty directory: what it restored came from the topic
    first = _restored_from(two)
    assert sorted(first) == list(range(PARTITIONS))
    for event in first.values():
        in_topic = event["state_topic_records_seen"] is not None
        assert event["source"] == ("topic" if in_topic else "fresh"), event
    # the returning worker's files were older than the topic's states on every partition
    returned = _restored_from(back)
    assert sorted(returned) == list(range(PARTITIONS))
    assert all(e["source"] == "topic" for e in returned.values()), returned


def test_a_zombie_whose_partition_was_claimed_gives_it_up_and_its_state_never_wins(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    topics, _ = proof_topics(kafka_bootstrap, separate_labels=False, seed=14)
    group = f"state-c-{uuid.uuid4().hex[:8]}"
    state_topic = f"{group}-state"
    _, first_ends = offline_reference(kafka_bootstrap, topics)
    zombie = start_worker(
        worker_args(kafka_bootstrap, group, topics, tmp_path / "zombie", *SLOW), tmp_path / "zombie.log"
    )
    wait_for(lambda: caught_up(tmp_path / "zombie", first_ends), 120, "the worker to reach the ends")
    wait_for(
        lambda: (
            _at(topic_states(kafka_bootstrap, state_topic), first_ends, range(PARTITIONS))
            and _committed(kafka_bootstrap, group, topics)["features"] == first_ends["features"]
        ),
        60,
        "the state topic and the committed offsets to reach the ends",
        interval=0.5,
    )
    before = topic_states(kafka_bootstrap, state_topic)
    # A new owner claims partition 0 in the state topic; the group still gives it to the zombie.
    with StateTopic(StateTopicConfig(kafka_bootstrap, state_topic, timeout_s=20.0)) as newer:
        claimed = newer.acquire(0)
    assert claimed.state is not None
    features, _ = dataset(separate_labels=False, seed=15, start_ts=1000.0 + 0.01 * N)
    produce_records(kafka_bootstrap, topics["features"], features)  # N more records, every partition
    offline, ends = offline_reference(kafka_bootstrap, topics, records=2 * N)
    gave_up = "partition taken over by another worker"
    wait_for(lambda: zombie.log_count(gave_up) > 0, 60, "the zombie giving up")
    wait_for(
        lambda: _at(topic_states(kafka_bootstrap, state_topic), ends, range(1, PARTITIONS)),
        120,
        "the other partitions to reach the new ends",
        interval=0.5,
    )
    # The zombie's state of partition 0 written after the claim is void: the topic still restores
    # the one from before, and the group's offset for it was not committed past that.
    after = topic_states(kafka_bootstrap, state_topic)
    assert after[0] == before[0]
    assert _committed(kafka_bootstrap, group, topics)["features"][0] == first_ends["features"][0]
    assert zombie.stop(signal.SIGTERM) == 0
    # The next owner, with an empty directory, continues partition 0 from that state to the exact result.
    heir = start_worker(
        worker_args(kafka_bootstrap, group, topics, tmp_path / "heir", *SLOW), tmp_path / "heir.log"
    )
    wait_for(lambda: caught_up(tmp_path / "heir", ends), 120, "the next owner to reach the ends")
    assert heir.stop(signal.SIGTERM) == 0
    assert_states_match_offline(topic_states(kafka_bootstrap, state_topic), offline, ends)


def test_a_state_topic_that_does_not_fit_stops_the_worker_with_every_problem_named(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"refuse-{k}-{tag}" for k in ("features", "predictions", "dead")}
    create_topics(kafka_bootstrap, list(topics.values()), 2)
    wrong = f"refuse-state-{tag}"
    create_topics(kafka_bootstrap, [wrong], 3)  # cleanup.policy delete: the broker's default
    args = topic_args(kafka_bootstrap, f"refuse-{tag}", topics, tmp_path / "ckpt")
    out = subprocess.run(
        [sys.executable, "-m", "worker", "run", *args, "--metrics-port", "0", "--state-topic", wrong],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert (
        f"sgt-worker run: setting state_topic (--state-topic / SGT_STATE_TOPIC): state topic {wrong!r} "
        "cannot be used: it has 3 partitions, the features topic has 2"
    ) in out.stderr
    assert "cleanup.policy is 'delete', it must be 'compact'" in out.stderr


pytestmark = pytest.mark.timeout(300)
