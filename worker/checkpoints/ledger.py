"""`DeliveryLedger`: a partition's runs of outputs handed to the producer and how many of them are
acknowledged, and the `DeliveryLatch` that an output lost for good sets.

A checkpoint says that every output of the records before it is in its topic, so a snapshot waits
until every run produced before it is acknowledged (step 2 of :mod:`worker.checkpoints.protocol`),
and a partition whose latch is set writes none at all. The ledger is that bookkeeping and nothing
else: the Kafka side (:class:`worker.kafka.delivery.RunDelivery`, the producer's delivery callback)
counts each run's acknowledgements down and sets the latch; the ledger, owned by the partition, tells
the checkpoint protocol where the acknowledgements stand.

>>> class Run:  # a run of outputs whose acknowledgements are counted down (RunDelivery)
...     def __init__(self, left): self.left = left
>>> ledger = DeliveryLedger()
>>> first, second = Run(2), Run(1)
>>> ledger.add(first); ledger.add(second); ledger.produced
2
>>> second.left = 0; ledger.advance()  # acknowledged in order: the first run still waits
0
>>> first.left = 0; ledger.advance()
2
"""

from __future__ import annotations

from collections import deque
from typing import Protocol


class DeliveryLatch:
    """Set by the first output of a partition that is not delivered for good; never cleared.

    A partition that rewinds to its last checkpoint gets a new ledger and latch: deliveries of the
    outputs produced before the rewind still report to the old one, which nobody reads any more.
    """

    __slots__ = ("failed", "topic")

    def __init__(self) -> None:
        self.failed: str | None = None  # the first permanent delivery error
        self.topic: str | None = None  # the topic it was meant for

    def set(self, error: object, topic: str | None) -> None:
        """Record the first failure (``str(error)``); later ones repeat it and are ignored."""
        if self.failed is None:
            self.failed, self.topic = str(error), topic


class Run(Protocol):
    """A run of outputs as the ledger sees it: how many acknowledgements are still to come."""

    left: int


class DeliveryLedger:
    """The runs of outputs one partition handed to the producer since it was restored, oldest first."""

    __slots__ = ("_acked", "_in_flight", "_produced", "latch")

    def __init__(self) -> None:
        self.latch = DeliveryLatch()
        self._in_flight: deque[Run] = deque()
        self._produced = 0  # runs handed to the producer
        self._acked = 0  # of those, the leading ones whose every output was acknowledged

    def add(self, run: Run) -> None:
        """A run of outputs was handed to the producer."""
        self._in_flight.append(run)
        self._produced += 1

    @property
    def produced(self) -> int:
        """Runs handed to the producer so far (a snapshot waits for this many to be acknowledged)."""
        return self._produced

    @property
    def in_flight(self) -> list[Run]:
        """The runs not yet known to be acknowledged, oldest first."""
        return list(self._in_flight)

    def advance(self) -> int:
        """Drop fully acknowledged runs from the front; return how many runs are acknowledged so far."""
        while self._in_flight and self._in_flight[0].left <= 0:
            self._in_flight.popleft()
            self._acked += 1
        return self._acked

    @property
    def failed(self) -> str | None:
        """The first output lost for good, or None."""
        return self.latch.failed

    def fail(self, reason: str) -> None:
        """Count every output in flight as lost (an aborted transaction): the partition rewinds."""
        self.latch.set(reason, None)
