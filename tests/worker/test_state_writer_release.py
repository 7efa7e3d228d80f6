"""Releasing a partition's transactional producer (pure unit tests: the producer is a stand-in).

A producer the broker has fenced may raise its fatal error from ``close``: that must not escape a
release (the worker closes its state topic on shutdown and on losing partitions), while any other
error still does. The end-to-end fencing test met the fatal close under load.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from worker.state_topic.admin import StateTopicConfig
from worker.state_topic.writer import StateWriter


class _ClosingProducer:
    def __init__(self, error: KafkaError | None) -> None:
        self.error = error
        self.closed = False

    def close(self) -> None:
        self.closed = True
        if self.error is not None:
            raise KafkaException(self.error)


def _writer_with(producer: _ClosingProducer) -> StateWriter:
    config = StateTopicConfig("127.0.0.1:9", "states", transactional_id_prefix="t")
    writer = StateWriter(config, lambda partition, reason: None)
    writer._transactional[0] = producer  # type: ignore[assignment]
    return writer


def test_a_fenced_producer_that_raises_its_fatal_error_on_close_is_released() -> None:
    fenced = _ClosingProducer(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))
    writer = _writer_with(fenced)
    writer.release(0)
    assert fenced.closed and not writer._transactional


def test_any_other_error_on_close_propagates() -> None:
    writer = _writer_with(_ClosingProducer(KafkaError(KafkaError._TRANSPORT, "broker down")))
    with pytest.raises(KafkaException):
        writer.release(0)
