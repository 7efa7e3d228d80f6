"""Deterministic merge of a partition's two topics, whatever batches the records arrive in.

Records of each topic are queued in offset order. The next record processed is the smaller head of
the two queues by ``(event time, topic rank, offset)``; features rank before labels, so a label with
the same time as its features is processed after them. A head is only taken when the other queue has a
head to compare with, or the other topic is known to be read to its end (or is not consumed at all).
That is the merge step of a merge sort over the two complete sequences: which record goes next never
depends on how much of either topic has been fetched, so a replay from the same offsets takes the same
order. (A topic being "at its end" is the one input that depends on timing; with all input already
written, as in a replay, it only happens at the true end.)

Each queue knows the bytes its records hold (given with them), so that the caller can stop fetching a
topic whose records pile up in bytes as well as in number.

>>> from worker.core.values import Invalid, MergeEntry, Record
>>> def entry(ts, rank, offset):  # an entry whose record does not matter here
...     return MergeEntry(ts, rank, offset, Record(offset, ts, None, None), Invalid("bad_x"))
>>> m = Merger()
>>> m.push(FEATURES, [entry(1.0, FEATURES, 0), entry(3.0, FEATURES, 1)], sizes=[100, 300])
>>> m.pop_ready(labels_done=False, features_done=False)
[]
>>> m.push(LABELS, [entry(2.0, LABELS, 0)], sizes=[20])
>>> [(e.rank, e.offset) for e in m.pop_ready(labels_done=False, features_done=False)]
[(0, 0), (1, 0)]
>>> m.pending(FEATURES), m.queued_bytes(FEATURES), m.queued_bytes(LABELS)
(1, 300, 0)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import islice

from worker.core.values import MergeEntry

FEATURES = 0
LABELS = 1

#: Default bound of the bytes queued per topic partition (the ``merge_max_bytes`` setting).
MERGE_MAX_BYTES = 64 << 20


class Merger:
    """Queues of fetched but not yet processed records of one partition, one per topic."""

    def __init__(self) -> None:
        self.queues: tuple[deque[MergeEntry], deque[MergeEntry]] = (deque(), deque())
        self._sizes: tuple[deque[int], deque[int]] = (deque(), deque())  # bytes of each queued record
        self._bytes = [0, 0]

    def push(self, rank: int, entries: Sequence[MergeEntry], sizes: Sequence[int] | None = None) -> None:
        """Queue entries of the topic of that rank, in offset order.

        ``sizes``: the bytes each entry holds (None: not counted, as 0 each).
        """
        if sizes is None:
            sizes = [0] * len(entries)
        elif len(sizes) != len(entries):
            raise ValueError(f"{len(entries)} entries but {len(sizes)} sizes")
        self.queues[rank].extend(entries)
        self._sizes[rank].extend(sizes)
        self._bytes[rank] += sum(sizes)

    def pending(self, rank: int) -> int:
        return len(self.queues[rank])

    def queued_bytes(self, rank: int) -> int:
        """The bytes of the records queued for that topic."""
        return self._bytes[rank]

    def clear(self) -> None:
        for queue, sizes in zip(self.queues, self._sizes, strict=True):
            queue.clear()
            sizes.clear()
        self._bytes = [0, 0]

    def pop_ready(self, labels_done: bool, features_done: bool, limit: int | None = None) -> list[MergeEntry]:
        """Remove and return, in merge order, every record whose turn is certain (at most ``limit``:
        the rest stay queued, in the same order, for the next call).

        ``labels_done`` / ``features_done``: that topic has no more records to come for now (read to
        its end, or not consumed).
        """
        feats, labels = self.queues
        before = len(feats), len(labels)
        out: list[MergeEntry] = []
        room = len(feats) + len(labels) if limit is None else limit
        while feats and labels and len(out) < room:  # entries compare as (ts, rank, offset): ranks differ
            out.append(feats.popleft() if feats[0] <= labels[0] else labels.popleft())
        for queue, done in ((feats, labels_done), (labels, features_done)):
            if queue and done and len(out) < room:
                taken = min(len(queue), room - len(out))
                out.extend(islice(queue, taken))
                for _ in range(taken):
                    queue.popleft()
        self._release(FEATURES, before[FEATURES] - len(feats))
        self._release(LABELS, before[LABELS] - len(labels))
        return out

    def _release(self, rank: int, taken: int) -> None:
        """Forget the sizes of the ``taken`` records that left the front of that queue."""
        sizes = self._sizes[rank]
        if taken == len(sizes):
            sizes.clear()
            self._bytes[rank] = 0
            return
        released = 0
        for _ in range(taken):
            released += sizes.popleft()
        self._bytes[rank] -= released
