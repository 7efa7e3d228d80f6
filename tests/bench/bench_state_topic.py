"""State topic cost: write and restore times of real checkpoints over the embedded Tansu broker.

For each model size (records learned of the rotating-hyperplane stream: classification, 10 numeric
features, the worker's default model), the checkpoint payload a partition would write
(``PartitionState.to_bytes()``) is written to a fresh state topic and restored by another
:class:`~worker.state_topic.client.StateTopic`, as a worker on another machine would. Loopback only.
Run from the repository root::

    .venv/bin/python -m tests.bench.bench_state_topic
    .venv/bin/python -m tests.bench.bench_state_topic --records 100000 --writes 3

Reported per size:

- payload bytes and chunk count; ``to_bytes`` and ``from_bytes`` times (the restore also decodes);
- write: median and max of ``--writes`` successive :meth:`StateTopic.write` calls (chunks and manifest
  acknowledged with acks=all, ownership checked, tombstones acknowledged);
- pipelined: the median time spent inside ``start_write`` and ``finish`` when ``finish`` is called
  only once every record is acknowledged (the loop's cost if it goes on processing meanwhile);
- restore, "compacted": a topic holding one state (what compaction leaves), read by a new owner whose
  clients are already connected (the worker creates its StateTopic while its group join runs);
  "cold" adds creating the clients; "history" reads a topic holding every state written so far, as
  Tansu (which never compacts) or the active segment of a real broker would;
- ``--transactional``: the same in transactional mode (each write one transaction);
- the write's share of processing time at a steady rate (``--rate``, records/s per worker) with a
  checkpoint every ``--checkpoint-records`` records: ``write_s * rate / checkpoint_records``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from worker.config import load_settings
from worker.core.partition_state import PartitionState, StateConfig
from worker.core.sgt_models import new_model
from worker.devtools.embedded_broker import start_tansu
from worker.devtools.streams import RotatingHyperplane

CONFIG = StateConfig("classification", None)
LEARN_BATCH = 10_000


def checkpoint_payload(records: int) -> bytes:
    """The checkpoint blob of a partition whose model learned ``records`` hyperplane records."""
    model = new_model(load_settings({}))
    stream = RotatingHyperplane(n_features=10, seed=1)
    for start in range(0, records, LEARN_BATCH):
        X, y = stream.batch(min(LEARN_BATCH, records - start), start)
        model.predict_learn_many(X, y.tolist())
    state = PartitionState(0, model, CONFIG)
    state.next_offsets = [records, 0]
    return state.to_bytes()


def measure(
    bootstrap: str, records: int, writes: int, max_message_bytes: int, transactional: bool
) -> dict[str, float]:
    from sgt.registry import MODEL_TYPES
    from worker.state_topic.admin import StateTopicConfig, ensure_topic
    from worker.state_topic.client import StateTopic

    blob = checkpoint_payload(records)
    state = PartitionState.from_bytes(blob, CONFIG, MODEL_TYPES)
    started = time.perf_counter()
    blob = state.to_bytes()
    to_bytes_s = time.perf_counter() - started
    started = time.perf_counter()
    PartitionState.from_bytes(blob, CONFIG, MODEL_TYPES)
    from_bytes_s = time.perf_counter() - started

    def fresh_topic() -> StateTopicConfig:
        config = StateTopicConfig(
            bootstrap, f"state-{uuid.uuid4().hex[:8]}", max_message_bytes=max_message_bytes
        )
        ensure_topic(config, 2)
        return config

    single, history = fresh_topic(), fresh_topic()
    with StateTopic(single) as writer:
        writer.acquire(1)  # connects and gets the idempotent producer's id
        writer.acquire(0)
        written = writer.write(0, blob)
    times, pipelined = [], []
    with StateTopic(history) as writer:
        writer.acquire(1)
        writer.acquire(0)
        for _ in range(writes):
            times.append(writer.write(0, blob).seconds)
        for _ in range(writes):  # as the loop may do it: start, go on working, finish once acknowledged
            pending = writer.start_write(0, blob)
            while not pending.acknowledged:
                writer.poll()
                time.sleep(0.001)
            pipelined.append(writer.finish(pending).seconds)

    def restore(config: StateTopicConfig, warm: bool) -> tuple[float, int, int]:
        started = time.perf_counter()
        with StateTopic(config) as reader:
            if warm:
                reader.acquire(1)
                started = time.perf_counter()
            restored = reader.acquire(0)
            assert restored.state is not None and restored.state.payload == blob
            return time.perf_counter() - started, restored.records, restored.bytes

    warm_s, warm_records, _ = restore(single, warm=True)
    cold_s, _, _ = restore(single, warm=False)
    hist_s, hist_records, hist_bytes = restore(history, warm=True)
    return {
        "records": records,
        "payload_bytes": len(blob),
        "chunks": written.chunks,
        "to_bytes_s": to_bytes_s,
        "from_bytes_s": from_bytes_s,
        "write_median_s": statistics.median(times),
        "write_max_s": max(times),
        "pipelined_s": statistics.median(pipelined),
        "restore_s": warm_s,
        "restore_records": warm_records,
        "restore_cold_s": cold_s,
        "history_s": hist_s,
        "history_records": hist_records,
        "history_bytes": hist_bytes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="100000,300000,1000000", help="model sizes, comma-separated")
    parser.add_argument("--writes", type=int, default=5, help="writes per size (median and max reported)")
    parser.add_argument("--max-message-bytes", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=55_000.0, help="steady records/s of one worker")
    parser.add_argument("--checkpoint-records", type=int, default=100_000)
    parser.add_argument(
        "--transactional", action="store_true", help="transactional mode (one producer per partition)"
    )
    args = parser.parse_args(argv)
    rows = []
    with start_tansu() as broker:
        for records in (int(r) for r in args.records.split(",")):
            rows.append(
                measure(
                    broker.bootstrap_servers, records, args.writes, args.max_message_bytes, args.transactional
                )
            )
    print(
        "| records learned | payload bytes | chunks | to_bytes ms | write ms median (max) "
        "| share at rate | pipelined ms | restore ms (records read) | cold restore ms "
        "| history restore ms (records, MB) | from_bytes ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        share = r["write_median_s"] * args.rate / args.checkpoint_records
        print(
            f"| {r['records']:,} | {r['payload_bytes']:,} | {r['chunks']} | {r['to_bytes_s'] * 1e3:.1f} "
            f"| {r['write_median_s'] * 1e3:.1f} ({r['write_max_s'] * 1e3:.1f}) | {share:.2%} "
            f"| {r['pipelined_s'] * 1e3:.2f} "
            f"| {r['restore_s'] * 1e3:.1f} ({r['restore_records']}) | {r['restore_cold_s'] * 1e3:.0f} "
            f"| {r['history_s'] * 1e3:.1f} ({r['history_records']}, {r['history_bytes'] / 1e6:.1f}) "
            f"| {r['from_bytes_s'] * 1e3:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
