"""Reading the state topic: one assign-only consumer that reads a partition's log to its end, and the
topic's metadata (does it exist, how many partitions).

Reads never join a consumer group or commit: a restore, an ownership check and ``sgt-worker inspect``
all read a partition from an offset to the end its fetch responses report.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from worker.state_topic.admin import StateTopicConfig, reader_config
from worker.state_topic.errors import StateTopicError
from worker.state_topic.rules import LogRecord


class StateReader:
    """The state topic's records and metadata, through one consumer created at first use."""

    def __init__(self, config: StateTopicConfig) -> None:
        self.config = config
        self._consumer: Consumer | None = None

    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(reader_config(self.config))
        return self._consumer

    def connect(self) -> None:
        """Connect now (about half a second) rather than at the first read."""
        self.consumer().list_topics(self.config.topic, timeout=self.config.timeout_s)

    def partition_count(self) -> int | None:
        """The topic's partition count now; None when it does not exist. StateTopicError when the
        broker does not answer.

        Asked through the reader's metadata request, not an AdminClient's DescribeTopics (which also
        gives the topic's id): librdkafka 2.16 crashed (a segmentation fault in its metadata cache) on
        the embedded broker's answer to that for a topic deleted and created again. A topic created
        again is found by its offsets instead (:meth:`worker.state_topic.client.StateTopic.finish`)."""
        topic = self.config.topic
        try:
            metadata = self.consumer().list_topics(topic, timeout=self.config.timeout_s).topics.get(topic)
        except KafkaException as exc:
            raise StateTopicError(
                f"cannot read state topic {topic!r}'s metadata: {exc.args[0].str()}"
            ) from None
        if metadata is not None and metadata.error is not None:
            if metadata.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise StateTopicError(f"cannot read state topic {topic!r}'s metadata: {metadata.error.str()}")
            return None
        return len(metadata.partitions) if metadata is not None and metadata.partitions else None

    def partitions(self) -> list[int]:
        """The state topic's partitions; StateTopicError when it cannot be reached or does not exist."""
        try:
            metadata = self.consumer().list_topics(self.config.topic, timeout=self.config.timeout_s)
        except KafkaException as exc:
            raise StateTopicError(
                f"cannot reach {self.config.bootstrap_servers}: {exc.args[0].str()}"
            ) from None
        found = metadata.topics.get(self.config.topic)
        if found is None or found.error is not None or not found.partitions:
            raise StateTopicError(
                f"state topic {self.config.topic!r} does not exist at {self.config.bootstrap_servers}"
            )
        return sorted(found.partitions)

    def read(self, partition: int, start: int, at_least: int) -> Iterator[LogRecord]:
        """Records of the partition from ``start`` to its end (at least past offset ``at_least``).

        The end is the high watermark of the fetch responses (librdkafka's partition-EOF event),
        which is right on every broker, unlike a ListOffsets(latest) request.
        """
        consumer = self.consumer()
        consumer.assign([TopicPartition(self.config.topic, partition, start)])
        deadline = time.monotonic() + self.config.timeout_s
        last = start - 1
        try:
            while time.monotonic() < deadline:
                # poll returns at the first message; consume(..., 0) then takes what has arrived.
                first = consumer.poll(0.05)
                batch = [] if first is None else [first, *consumer.consume(10_000, 0)]
                for message in batch:
                    if message.topic() != self.config.topic or message.partition() != partition:
                        continue
                    error, offset = message.error(), message.offset()
                    if error is None:
                        if offset is not None and offset >= start:
                            last = offset
                            yield LogRecord(last, message.key(), message.value())
                    elif error.code() == KafkaError._PARTITION_EOF:
                        if offset is not None and offset > at_least:
                            return
                    elif error.fatal() or not error.retriable():
                        raise StateTopicError(
                            f"reading state topic {self.config.topic!r} partition {partition}: {error.str()}"
                        )
            raise StateTopicError(
                f"reading state topic {self.config.topic!r} partition {partition} did not reach its end "
                f"within {self.config.timeout_s:g} s (last offset read {last})"
            )
        finally:
            consumer.unassign()

    def close(self) -> None:
        """Close the consumer, if one was created. Idempotent."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class ReadCount:
    """Counts the records and bytes a read yields and the offset after the last one."""

    def __init__(self) -> None:
        self.records = self.bytes = 0
        self.end = 0

    def counting(self, records: Iterator[LogRecord]) -> Iterator[LogRecord]:
        for record in records:
            self.records += 1
            self.bytes += len(record.key or b"") + len(record.value or b"")
            self.end = record.offset + 1
            yield record
