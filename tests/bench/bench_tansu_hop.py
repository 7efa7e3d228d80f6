"""One Tansu hop (idempotent producer -> broker -> assigned consumer) at a steady rate, by 5-s window.

Shows how the embedded test broker's latency drifts as a partition accumulates record batches, and
how the producer's ``linger.ms`` (which sets the batch count) and the partition count change that.
Producer and consumer run in separate processes; the record carries its send time. Loopback only.
Run from the repository root::

    .venv/bin/python -m tests.bench.bench_tansu_hop --partitions 4 --linger-ms 5
    .venv/bin/python -m tests.bench.bench_tansu_hop --partitions 4 --linger-ms 10
    .venv/bin/python -m tests.bench.bench_tansu_hop --fetch-wait-ms 500 --fetch-min-bytes 1000

``--fetch-wait-ms`` and ``--fetch-min-bytes`` are the consumer's ``fetch.wait.max.ms`` (default 10) and
``fetch.min.bytes`` (default 1): Tansu holds a fetch at the tail for the whole wait.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition

from worker.devtools.embedded_broker import create_topics, start_tansu

TOPIC = "hop"
WINDOW_S = 5.0
DRAIN_S = 8.0  # the consumer keeps reading this long after the producer's last record


def produce(bootstrap: str, rate: float, seconds: float, linger_ms: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": "all", "enable.idempotence": True}
    )
    producer.produce(TOPIC, b"{}")  # a new idempotent producer's first record waits for its id
    producer.flush(10)
    start, i = time.time(), 0
    while time.time() - start < seconds:
        wait = start + i / rate - time.time()
        if wait > 0:
            time.sleep(wait)
        producer.produce(TOPIC, orjson.dumps({"sent": time.time()}), key=str(i).encode())
        producer.poll(0)
        i += 1
    producer.flush(10)


def consume(
    bootstrap: str, partitions: int, seconds: float, out: Any, wait_ms: int = 10, min_bytes: int = 1
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "hop",
            "fetch.wait.max.ms": wait_ms,
            "fetch.min.bytes": min_bytes,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    seen: list[tuple[float, float]] = []  # (sent, latency)
    end = time.time() + seconds + DRAIN_S
    while time.time() < end:
        for message in consumer.consume(100, 0.001):
            if message.error() is None:
                sent = orjson.loads(message.value()).get("sent")
                if sent is not None:
                    seen.append((sent, time.time() - sent))
    consumer.close()
    out.put(seen)


def windows(seen: list[tuple[float, float]]) -> list[tuple[int, int, float, float]]:
    """(window start s, records, p50 ms, p99 ms) for each WINDOW_S of send time.

    >>> windows([(0.0, 0.010), (1.0, 0.020), (6.0, 0.030)])
    [(0, 2, 20.0, 20.0), (5, 1, 30.0, 30.0)]
    """
    if not seen:
        return []
    first = min(sent for sent, _ in seen)
    by_window: dict[int, list[float]] = {}
    for sent, latency in seen:
        by_window.setdefault(int((sent - first) // WINDOW_S), []).append(latency)
    out = []
    for w in sorted(by_window):
        xs = sorted(by_window[w])
        out.append((int(w * WINDOW_S), len(xs), 1000 * xs[len(xs) // 2], 1000 * xs[int(len(xs) * 0.99)]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.bench_tansu_hop", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--rate", type=float, default=1000.0, help="records per second")
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--fetch-wait-ms", type=int, default=10, help="the consumer's fetch.wait.max.ms")
    parser.add_argument("--fetch-min-bytes", type=int, default=1, help="the consumer's fetch.min.bytes")
    args = parser.parse_args(argv)
    with start_tansu() as broker:
        create_topics(broker.bootstrap_servers, [TOPIC], args.partitions)
        queue: Any = multiprocessing.Queue()
        reader = multiprocessing.Process(
            target=consume,
            args=(
                broker.bootstrap_servers,
                args.partitions,
                args.seconds,
                queue,
                args.fetch_wait_ms,
                args.fetch_min_bytes,
            ),
        )
        reader.start()
        time.sleep(1.0)  # the reader is assigned and fetching before the first record
        writer = multiprocessing.Process(
            target=produce, args=(broker.bootstrap_servers, args.rate, args.seconds, args.linger_ms)
        )
        writer.start()
        seen = queue.get()
        reader.join()
        writer.join()
    print(
        f"one Tansu hop, {args.partitions} partitions, linger.ms={args.linger_ms}, "
        f"{args.rate:,.0f} records/s, fetch.wait.max.ms={args.fetch_wait_ms}, "
        f"fetch.min.bytes={args.fetch_min_bytes}"
    )
    latencies = sorted(latency for _, latency in seen)
    if latencies:
        p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]
        print(f"all records {len(latencies)}  p50 {1000 * p50:.1f} ms  p99 {1000 * p99:.1f} ms")
    for start, n, p50, p99 in windows(seen):
        if start >= args.seconds:  # the producer's last record or two
            continue
        print(f"{start:3d}-{start + int(WINDOW_S)} s  records {n:5d}  p50 {p50:6.1f} ms  p99 {p99:6.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
