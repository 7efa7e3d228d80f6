"""The producer's side of the delivery bookkeeping of a partition's outputs: acknowledgements counted
per run, and the partition's latch set by a delivery failing for good (the
:class:`~worker.checkpoints.ledger.DeliveryLedger` that holds both is the partition's).

The producer retries a message until ``message.timeout.ms``; a delivery report with an error after that is
final (the broker was away too long, the topic refused the message). Such an output is lost unless its
record is processed again, so the failure is latched on the partition's
:class:`~worker.checkpoints.ledger.DeliveryLatch`: from then on no checkpoint or commit may cover that
partition's records, and the partition runtime rewinds it to its last checkpoint (see
:mod:`worker.kafka.partition_runtime`).

>>> import logging
>>> from worker.checkpoints.ledger import DeliveryLatch
>>> latch = DeliveryLatch()
>>> run = RunDelivery([1.0, 2.0], None, logging.getLogger("doc"), latch)
>>> run(None, None); run.left, latch.failed
(1, None)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import KafkaError, Message, Producer

from worker.checkpoints.ledger import DeliveryLatch
from worker.logs import fields


class RunDelivery:
    """The delivery callback of one run's outputs: counts the acknowledgements and, when the last one
    arrives, reports every output's latency (its record's event time to that moment) if asked to.

    One shared callable per run rather than a closure per record keeps the per-output cost to a
    counter decrement. The outputs of a run are produced together, so their acknowledgements arrive
    together too; timing them all by the last one errs, if at all, on the slow side. A delivery that
    fails for good is logged, counted as done (nothing more will come for it) and latched on the
    partition's :class:`~worker.checkpoints.ledger.DeliveryLatch`, which keeps every later checkpoint
    of the partition away.
    """

    __slots__ = ("event_ts", "latch", "left", "log", "report", "what")

    def __init__(
        self,
        event_ts: list[float],
        report: Callable[[tuple[float, list[float]]], None] | None,
        log: logging.Logger,
        latch: DeliveryLatch,
        what: str = "prediction",
    ) -> None:
        self.event_ts, self.left, self.report = event_ts, len(event_ts), report
        self.log, self.what, self.latch = log, what, latch

    def __call__(self, error: KafkaError | None, msg: Message | None) -> None:
        if error is not None:
            topic = msg.topic() if msg is not None else None
            if self.latch.failed is None:  # the first failure of the partition; the rest repeat it
                self.log.error(f"{self.what} not delivered", extra=fields(error=str(error), topic=topic))
            self.latch.set(error, topic)
        self.left -= 1
        if self.left == 0 and self.report is not None:
            self.report((time.time(), self.event_ts))
            self.event_ts = []


def produce_retrying(
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes,
    headers: list[tuple[str, bytes]] | None,
    callback: Callable[[KafkaError | None, Message], None],
) -> None:
    """``producer.produce``, waiting out a full local queue (serving deliveries meanwhile)."""
    # the type confluent-kafka's produce declares (a list of (str, bytes) is one, but lists are invariant)
    kafka_headers: list[tuple[str, str | bytes | None]] | None = None if headers is None else list(headers)
    while True:
        try:
            producer.produce(topic, value=value, key=key, headers=kafka_headers, on_delivery=callback)
            return
        except BufferError:
            producer.poll(0.05)
