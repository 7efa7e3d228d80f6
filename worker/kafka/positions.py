"""`FetchPosition`: where a partition's topics are being read, which of them are paused, and how
long a position has stayed past the end of its topic.

A fetch from before a seek may still deliver older records; :meth:`FetchPosition.unseen` keeps each
offset once, in order. The partition runtime owns a partition's position and is its only writer.

>>> [r.offset for r in unseen([Record(o, 0.0, None, b"") for o in (3, 4, 5)], 4)]
[4, 5]
>>> position = FetchPosition([4, 0])
>>> [r.offset for r in position.unseen(0, [Record(o, 0.0, None, b"") for o in (3, 4, 5)])], position.fetched
([4, 5], [6, 0])
"""

from __future__ import annotations

from worker.core.values import Record


class FetchPosition:
    """A partition's next offset to receive per topic rank, its paused ranks, and since when each
    rank's position has been past its topic's end (None: it is not)."""

    __slots__ = ("ahead_since", "fetched", "paused")

    def __init__(self, next_offsets: list[int]) -> None:
        self.fetched = list(next_offsets)  # next offset to receive, per topic rank
        self.paused: set[int] = set()  # topic ranks paused because their queue is long
        self.ahead_since: list[float | None] = [None, None]

    def unseen(self, rank: int, records: list[Record]) -> list[Record]:
        """The records of topic ``rank`` not received before; the position moves past them."""
        kept = unseen(records, self.fetched[rank])
        if kept:
            self.fetched[rank] = kept[-1].offset + 1
        return kept

    def pause(self, rank: int) -> None:
        self.paused.add(rank)

    def resume(self, rank: int) -> None:
        self.paused.discard(rank)

    def stayed_past_end(self, rank: int, high: int, queued: bool, now: float, grace: float) -> bool:
        """Whether topic ``rank``'s position has stayed past ``high`` (its fetched end; -1: unknown)
        for ``grace`` seconds with nothing ``queued`` from it."""
        if high < 0 or self.fetched[rank] <= high or queued:
            self.ahead_since[rank] = None
            return False
        since = self.ahead_since[rank]
        if since is None:
            self.ahead_since[rank] = now
            return False
        return now - since >= grace

    def read_again(self, rank: int) -> None:
        """Topic ``rank`` is read again from its start."""
        self.ahead_since[rank] = None
        self.fetched[rank] = 0


def unseen(records: list[Record], fetched: int) -> list[Record]:
    """The records of one topic partition at or after offset ``fetched``, each offset once.

    A fetch from before a seek may still deliver older records; they are dropped here, as is anything
    out of order.
    """
    kept = []
    for record in records:
        if record.offset >= fetched:
            kept.append(record)
            fetched = record.offset + 1
    return kept
