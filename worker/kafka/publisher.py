"""`Publisher`: a processed run's predictions and dead letters handed to the producer, each run
counted in its partition's :class:`~worker.checkpoints.ledger.DeliveryLedger`, and the latency of
every prediction (its record's event time to its acknowledgement) observed once it is delivered.
"""

from __future__ import annotations

import logging

import numpy as np

from worker.checkpoints.ledger import DeliveryLedger
from worker.config import WorkerSettings
from worker.core.partition_state import ProcessResult
from worker.kafka.clients import Clients
from worker.kafka.delivery import RunDelivery, produce_retrying
from worker.metrics import WorkerMetrics


class Publisher:
    """The producer side of the worker's loop (the producer itself is the clients', renewed apart)."""

    def __init__(
        self, settings: WorkerSettings, clients: Clients, metrics: WorkerMetrics, log: logging.Logger
    ) -> None:
        self.settings, self.clients, self.metrics, self.log = settings, clients, metrics, log
        self._latencies: list[tuple[float, list[float]]] = []  # (delivered at, event times of a run)

    def publish(self, partition: int, deliveries: DeliveryLedger, result: ProcessResult) -> None:
        """Produce a run's predictions and dead letters; count them as one run each in ``deliveries``."""
        producer = self.clients.producer
        assert producer is not None
        topic = self.settings.predictions_topic
        delivered = RunDelivery(
            [out.ts for out in result.predictions], self._latencies.append, self.log, deliveries.latch
        )
        produce = producer.produce
        for out in result.predictions:
            try:  # inline, as this runs once per prediction; produce_retrying waits out a full queue
                produce(topic, out.value, out.key, on_delivery=delivered)
            except BufferError:
                produce_retrying(producer, topic, out.key, out.value, None, delivered)
        if result.predictions:
            deliveries.add(delivered)
        if result.dead_letters:
            ts = [letter.output.ts for letter in result.dead_letters]
            dead = RunDelivery(ts, None, self.log, deliveries.latch, "dead letter")
            for letter in result.dead_letters:
                out = letter.output
                produce_retrying(
                    producer, self.settings.dead_letter_topic, out.key, out.value, out.headers, dead
                )
                self.metrics.invalid.labels(topic=letter.source_topic, reason=letter.reason).inc()
            deliveries.add(dead)
        p = str(partition)
        if result.predictions:
            self.metrics.predictions.labels(partition=p).inc(len(result.predictions))
        if result.trained:
            self.metrics.trained.labels(partition=p).inc(result.trained)
        for (side, reason), n in result.expired.items():
            self.metrics.join_expired.labels(partition=p, side=side, reason=reason).inc(n)

    def observe_latencies(self) -> None:
        """Observe the latencies of the runs delivered since the last call (their delivery callbacks
        run inside the producer's ``poll`` and ``flush``)."""
        if self._latencies:
            for delivered_at, event_ts in self._latencies:
                self.metrics.latency.observe_many(np.maximum(delivered_at - np.asarray(event_ts), 0.0))
            self._latencies.clear()
