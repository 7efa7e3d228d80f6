"""A partition's transactional producer in the state topic's writer: its release and its fencing (pure
unit tests: the producer is a stand-in).

A producer the broker has fenced may raise its fatal error from ``close``: that must not escape a
release (the worker closes its state topic on shutdown and on losing partitions), while any other
error still does. The end-to-end fencing test met the fatal close under load.

A producer fenced while a write is under way may refuse a record with an unflagged _FATAL ("Unable to
produce message"), and its abort fails alike: the write is then a fencing (StateTopicFenced: the
partition is lost), not a failed write to try again on a producer that can never commit.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from worker.state_topic.admin import StateTopicConfig
from worker.state_topic.errors import StateTopicFenced, StateWriteError
from worker.state_topic.writer import StateWriter


class _ClosingProducer:
    def __init__(self, error: KafkaError | None) -> None:
        self.error = error
        self.closed = False

    def close(self) -> None:
        self.closed = True
        if self.error is not None:
            raise KafkaException(self.error)


class _FailingProducer:
    """A transactional producer whose ``produce`` and ``abort_transaction`` raise ``error``."""

    def __init__(self, error: KafkaError) -> None:
        self.error = error

    def begin_transaction(self) -> None:
        pass

    def produce(self, *args: object, **kwargs: object) -> None:
        raise KafkaException(self.error)

    def abort_transaction(self, timeout: float) -> None:
        raise KafkaException(self.error)


def _writer_with(producer: object, fenced: list[int] | None = None) -> StateWriter:
    """A transactional writer whose partition 0 has `producer`; the partitions it reports fenced are
    appended to `fenced`."""
    told = [] if fenced is None else fenced
    config = StateTopicConfig("127.0.0.1:9", "states", transactional_id_prefix="t")
    writer = StateWriter(config, lambda partition, reason: told.append(partition))
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


def test_a_record_refused_by_a_producer_in_a_fatal_state_is_a_fencing() -> None:
    fatal = KafkaError(KafkaError._FATAL, "Unable to produce message: Local: Fatal error")  # (no flag)
    fenced: list[int] = []
    writer = _writer_with(_FailingProducer(fatal), fenced)
    with pytest.raises(StateTopicFenced, match="refused, the broker fenced its transactional producer"):
        writer.send(0, [(b"key", b"value")], "the state")
    assert fenced == [0]


def test_a_record_refused_for_another_reason_is_a_failed_write() -> None:
    writer = _writer_with(_FailingProducer(KafkaError(KafkaError._TRANSPORT, "broker down")))
    with pytest.raises(StateWriteError, match="not written"):
        writer.send(0, [(b"key", b"value")], "the state")
