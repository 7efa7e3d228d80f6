"""Writing the state topic: the producers (one idempotent producer shared by every partition, or in
transactional mode one transactional producer per partition), their delivery reports, and what a
write in flight is.

The rules of what to write (chunks, manifests, slots, cleanup) are :mod:`worker.state_topic.rules`';
when a write counts is :class:`worker.state_topic.client.StateTopic`'s. This module only moves
records and says which were acknowledged.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from worker.state_topic import rules
from worker.state_topic.admin import StateTopicConfig, client_settings
from worker.state_topic.errors import StateTopicError, StateTopicFenced, StateWriteError

# _FATAL: ``produce()`` on a producer already in a fatal state (fenced while its caller ran) raises
# "Unable to produce message: Local: Fatal error" without the fatal flag; the fatal error itself
# (_FENCED) reaches only the error callback
_FENCED = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH, KafkaError._FATAL}
)


def is_fenced(error: KafkaError) -> bool:
    """Whether a producer error means that this transactional producer can never commit again: the
    broker fenced it (a newer instance initialised its ``transactional.id``), or it is in a fatal state.
    The state topic's writer and the exactly-once checkpointer (worker.checkpoints.transactional) both
    stop on it rather than abort and try again.

    >>> is_fenced(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))
    True
    >>> is_fenced(KafkaError(KafkaError._FATAL, "Unable to produce message: Local: Fatal error"))
    True
    >>> is_fenced(KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True))
    False
    """
    return error.code() in _FENCED or error.fatal()


class Delivery:
    """Delivery reports of one batch of records: offsets in produce order, and the first failure."""

    def __init__(self, count: int, producer: Producer) -> None:
        self.producer = producer  # the one the records were handed to
        self.offsets: list[int | None] = [None] * count
        self.errors: list[str] = []
        self.queued = 0  # records handed to the producer (a locally refused one ends the batch)
        self.reports = 0

    def callback(self, index: int) -> Any:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            self.reports += 1
            if err is not None:
                self.errors.append(err.str())
            else:
                self.offsets[index] = msg.offset()

        return on_delivery

    @property
    def missing(self) -> int:
        return sum(o is None for o in self.offsets)

    @property
    def acknowledged(self) -> bool:
        """Every queued record has its delivery report."""
        return self.reports == self.queued


@dataclass
class PendingWrite:
    """A state write handed to the producer by :meth:`StateTopic.start_write`, not yet confirmed."""

    partition: int
    plan: rules.WritePlan
    delivery: Delivery
    payload_bytes: int
    cost: float = 0.0  # seconds spent in start_write

    @property
    def acknowledged(self) -> bool:
        """True once every record has a delivery report: :meth:`StateTopic.finish` will not wait."""
        return self.delivery.acknowledged


class StateWriter:
    """The state topic's producers. ``on_fenced(partition, reason)`` is told when the broker fences a
    partition's transactional producer (its owner lost the partition), before the error is raised."""

    def __init__(self, config: StateTopicConfig, on_fenced: Callable[[int, str], None]) -> None:
        self.config = config
        self._on_fenced = on_fenced
        # One idempotent producer for every partition, or (transactional mode) one per partition.
        self._shared = None if config.transactional_id_prefix else Producer(self._producer_settings())
        self._transactional: dict[int, Producer] = {}
        self._closed = False

    def _producer_settings(self) -> dict[str, Any]:
        return {
            **client_settings(self.config),
            "enable.idempotence": True,  # in order, no duplicates, per partition
            "acks": "all",
            "message.max.bytes": self.config.max_message_bytes,
            "compression.type": "none",  # the payload is compressed already
            "linger.ms": 0,
        }

    @property
    def transactional(self) -> bool:
        """True when each partition is written in transactions by its own transactional producer."""
        return self._shared is None

    def producer(self, partition: int) -> Producer:
        if self._shared is not None:
            return self._shared
        return self._transactional[partition]

    def connect(self) -> None:
        """Connect the shared producer now rather than at the first write."""
        if self._shared is not None:
            self._shared.list_topics(self.config.topic, timeout=self.config.timeout_s)

    def init_transactional(self, partition: int) -> None:
        """(Re)initialise the partition's transactional producer: the broker fences any older one."""
        prefix = self.config.transactional_id_prefix
        producer = Producer({**self._producer_settings(), "transactional.id": f"{prefix}-{partition}"})
        try:
            producer.init_transactions(self.config.timeout_s)
        except KafkaException as exc:
            raise StateTopicError(
                f"state topic {self.config.topic!r} partition {partition}: cannot initialise the "
                f"transactional producer: {exc.args[0].str()}"
            ) from None
        self._transactional[partition] = producer

    def release(self, partition: int) -> None:
        """Close the partition's transactional producer, if it has one."""
        producer = self._transactional.pop(partition, None)
        if producer is not None:
            # A fenced producer cannot abort its transaction and says so in a RuntimeWarning, or, when
            # the broker's fencing reached it first, raises that fatal error from close: either way it
            # is unusable and there is nothing left to release. Any other error propagates.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                try:
                    producer.close()
                except KafkaException as exc:
                    if not exc.args[0].fatal():
                        raise

    def poll(self) -> None:
        """Serve the delivery reports of writes in flight (cheap; the loop may call it every turn)."""
        for producer in [self._shared] if self._shared is not None else self._transactional.values():
            producer.poll(0)

    def send(self, partition: int, records: list[tuple[bytes, bytes | None]], what: str) -> Delivery:
        """Produce ``records`` and wait for every acknowledgement (one transaction in transactional mode)."""
        if self.transactional:
            self.begin(partition, what)
        delivery = self.produce(partition, records)
        self.complete(partition, delivery, what)
        return delivery

    def begin(self, partition: int, what: str) -> None:
        try:
            self._transactional[partition].begin_transaction()
        except KafkaException as exc:
            self._transaction_failed(partition, exc.args[0], what)

    def complete(self, partition: int, delivery: Delivery, what: str) -> None:
        """Wait for the records' acknowledgements (commit the transaction in transactional mode).

        Raises StateWriteError unless every record was acknowledged, StateTopicFenced when the broker
        fenced this partition's transactional producer.
        """
        if self.transactional:
            producer = self._transactional[partition]
            try:
                if delivery.queued < len(delivery.offsets):  # a record was refused: commit nothing
                    producer.abort_transaction(self.config.timeout_s)
                else:
                    producer.commit_transaction(self.config.timeout_s)
            except KafkaException as exc:
                self._transaction_failed(partition, exc.args[0], what)
        elif not delivery.acknowledged:
            self.drain(partition)
        if delivery.errors or delivery.missing:
            self.renew_after_failure(delivery)
            first = (
                delivery.errors[0]
                if delivery.errors
                else f"not acknowledged within {self.config.timeout_s:g} s"
            )
            raise StateWriteError(
                f"state topic {self.config.topic!r} partition {partition}: {what} not written, "
                f"{delivery.missing} of {len(delivery.offsets)} records unacknowledged ({first})"
            )

    def _transaction_failed(self, partition: int, error: KafkaError, what: str) -> NoReturn:
        if is_fenced(error):
            reason = f"the broker fenced its transactional producer ({error.str()})"
            self._on_fenced(partition, reason)
            raise StateTopicFenced(
                f"state topic {self.config.topic!r} partition {partition}: {what} refused, {reason}; "
                "it lost the partition"
            )
        with contextlib.suppress(KafkaException):
            self._transactional[partition].abort_transaction(self.config.timeout_s)
        raise StateWriteError(
            f"state topic {self.config.topic!r} partition {partition}: {what} not written, "
            f"transaction aborted ({error.str()})"
        )

    def produce(
        self, partition: int, records: list[tuple[bytes, bytes | None]], producer: Producer | None = None
    ) -> Delivery:
        """Hand ``records`` to ``producer`` (default: the partition's) without waiting."""
        producer = producer or self.producer(partition)
        delivery = Delivery(len(records), producer)
        for index, (key, value) in enumerate(records):
            while True:
                try:
                    producer.produce(
                        self.config.topic,
                        value,
                        key,
                        partition=partition,
                        on_delivery=delivery.callback(index),
                    )
                    delivery.queued += 1
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.05)
                except KafkaException as exc:  # refused locally (unknown partition, too large, ...)
                    delivery.errors.append(exc.args[0].str())
                    return delivery
        return delivery

    def renew_after_failure(self, delivery: Delivery) -> None:
        """Replace the shared producer when records handed to it were not delivered.

        An idempotent producer whose records timed out (the broker was out of reach for longer than
        ``message.timeout.ms``) can stay unable to deliver anything: a broker may answer each of its
        later requests with PRODUCER_FENCED, and then no state would ever be written again. The next
        write goes through a new producer. What other partitions' writes still have in the old one
        is purged first: their delivery reports fail, so those writes fail (and are written again
        later) instead of waiting for reports that would never be served. Transactional producers
        and a caller's producer (:meth:`StateTopic.stage`) are left alone.
        """
        old = self._shared
        if old is None or delivery.producer is not old:
            return
        old.purge()
        # serves the purged records' delivery reports: all of them at once, as the purge queued them
        # before returning; waiting (if one were still to come) beats a write that never finishes
        old.flush(self.config.timeout_s)
        self._shared = Producer(self._producer_settings())

    def drain(self, partition: int) -> None:
        """Wait for every delivery report (or the timeout); undelivered records are purged."""
        producer = self.producer(partition)
        if producer.flush(self.config.timeout_s):
            producer.purge(in_queue=True, in_flight=False)
            producer.flush(0)

    def close(self) -> None:
        """Close the transactional producers, flush and close the shared one. Idempotent."""
        for partition in list(self._transactional):
            self.release(partition)
        if not self._closed and self._shared is not None:
            self._shared.flush(self.config.timeout_s)
            self._shared.close()
        self._closed = True
