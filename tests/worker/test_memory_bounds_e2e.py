"""The join buffer's byte bound against the real broker, with a real worker process.

Forty labels of 200 KB whose features never come: with ``--join-max-bytes 1000000`` the buffer keeps
the newest four (the bytes of each label's record and key, and 256 more), the others are
dead-lettered byte for byte as ``unknown_id`` and counted as dropped for size, and the checkpoint
stays about as large as the buffer. Before the bound all forty stayed, since only a count
(``join_max_pending``, 100,000) limited the buffer.
"""

from __future__ import annotations

import signal
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.kafka_util import produce_records, read_all
from tests.worker.worker_util import (  # start_worker_fixture provides the start_worker fixture
    caught_up,
    checkpoint_headers,
    samples,
    start_worker_fixture,  # noqa: F401
    value,
    wait_for,
    worker_args,
)
from worker.checkpoints.file_store import checkpoint_path
from worker.devtools.embedded_broker import create_topics, free_port

LABELS = 40
LABEL_BYTES = 200_000
MAX_BYTES = 1_000_000


def test_labels_past_the_join_byte_bound_are_dead_lettered_and_the_checkpoint_stays_small(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"joinbytes-{k}-{tag}" for k in ("features", "labels", "predictions", "dead")}
    create_topics(kafka_bootstrap, list(topics.values()), 1)
    labels = [
        (
            f"q{i:02d}".encode(),
            orjson.dumps({"id": f"orphan{i:02d}", "y": "a", "ts": 10.0 + i, "pad": "z" * LABEL_BYTES}),
        )
        for i in range(LABELS)
    ]
    features = [
        (f"k{i}".encode(), orjson.dumps({"id": f"f{i}", "x": {"a": float(i)}, "ts": 100.0 + i}))
        for i in range(5)
    ]
    produce_records(kafka_bootstrap, topics["labels"], labels)
    produce_records(kafka_bootstrap, topics["features"], features)
    ckpt, port = tmp_path / "ckpt", free_port()
    args = worker_args(
        kafka_bootstrap,
        f"joinbytes-{tag}",
        topics,
        ckpt,
        *("--join-max-bytes", str(MAX_BYTES), "--checkpoint-seconds", "0.3"),
        *("--metrics-port", str(port), "--metrics-host", "127.0.0.1"),
    )
    worker = start_worker(args, tmp_path / "w.log")
    ends = {"features": {0: len(features)}, "labels": {0: LABELS}}
    wait_for(lambda: caught_up(ckpt, ends), 90, "the worker to reach the ends")
    each = len(labels[0][1]) + len(labels[0][0]) + 256
    kept = MAX_BYTES // each
    assert kept == 4

    def scrape() -> dict:
        return samples(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode())

    wait_for(  # gauges are refreshed once a second
        lambda: value(scrape(), "sgt_join_pending_bytes", partition="0", side="labels") == kept * each,
        10,
        "the join's bytes gauge",
    )
    expired = value(scrape(), "sgt_join_expired_total", partition="0", side="labels", reason="size")
    assert expired == LABELS - kept
    assert worker.stop(signal.SIGTERM) == 0
    header, _ = checkpoint_headers(ckpt, 1)[0]
    assert [entry[0] for entry in header["join"]["labels"]] == [
        f"orphan{i:02d}" for i in range(LABELS - kept, LABELS)
    ]
    # the kept labels (in base64), the model and the rest
    assert checkpoint_path(ckpt, 0).stat().st_size < 1.5 * MAX_BYTES
    dead = read_all(kafka_bootstrap, topics["dead"], 1, expect=LABELS - kept, idle_s=10)
    assert [(m.key(), m.value()) for m in dead] == labels[: LABELS - kept]
    assert {dict(m.headers())["reason"] for m in dead} == {b"unknown_id"}


pytestmark = pytest.mark.timeout(300)
